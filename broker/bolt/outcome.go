package bolt

import (
	"bytes"
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

const (
	outcomeSuccess   = conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS
	outcomeRetry     = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
	outcomeSkipRetry = conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY
)

// Complete records an attempt's outcome; see broker.Broker.
//   - SUCCESS: COMPLETED, result kept for the retention.
//   - RETRY: RETRY after the backoff with retried+1 and last_error; ARCHIVED
//     when the retries are spent or an operator canceled the task.
//   - SKIP_RETRY: ARCHIVED with last_error.
//   - RELEASED and UNSPECIFIED: PENDING at once, retried unchanged.
func (e *Engine) Complete(_ context.Context, p broker.CompleteParams) (broker.State, error) {
	var policy *conveyorv1.RetryPolicy
	if p.Outcome == outcomeRetry {
		var err error
		if policy, err = e.retryPolicy(p.Lease.TaskID); err != nil {
			return 0, err
		}
	}
	now := p.Now.UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, errClosed
	}
	k, _, err := e.currentLeaseLocked(p.SessionID, p.Lease)
	if err != nil {
		return 0, err
	}
	m := e.tasks.getOrZero(k)
	q := e.queues[m.queue]
	errMsg := p.ErrorMsg
	switch p.Outcome {
	case outcomeSuccess:
		q.processed++
		result := bytes.Clone(p.Result) // written by the committer, after Complete returns
		e.finishLocked(k, m, stateCompleted, now, func(st *storagev1.TaskStatus) {
			st.Result = result
			st.ProgressPercent = 100
		})
		return stateCompleted, nil
	case outcomeRetry:
		q.processed++
		q.failed++
		if m.flags&flagCanceled != 0 || m.retried >= m.maxRetry {
			e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) { st.LastError = errMsg })
			return stateArchived, nil
		}
		due := satAdd(now, e.cfg.Backoff(policy, m.retried))
		e.dropLeaseLocked(k)
		e.toRetryLocked(k, m, due, now, errMsg)
		return stateRetry, nil
	case outcomeSkipRetry:
		q.processed++
		q.failed++
		e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) { st.LastError = errMsg })
		return stateArchived, nil
	default:
		e.releaseLocked(k, now)
		return e.stateOfLocked(k), nil
	}
}

func (e *Engine) stateOfLocked(k key) broker.State {
	if m, ok := e.tasks.get(k); ok {
		return m.state
	}
	return stateCanceled
}

// retryPolicy reads a task's retry policy from its immutable spec.
func (e *Engine) retryPolicy(id string) (*conveyorv1.RetryPolicy, error) {
	k, err := parseKey(id)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, broker.ErrLeaseLost)
	}
	var policy *conveyorv1.RetryPolicy
	err = e.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketTasks).Get(k[:])
		if v == nil {
			return fmt.Errorf("task %s: %w", id, broker.ErrLeaseLost)
		}
		var spec storagev1.TaskSpec
		if err := proto.Unmarshal(v, &spec); err != nil {
			return fmt.Errorf("spec of %s: %w", id, err)
		}
		policy = spec.GetOptions().GetRetryPolicy()
		return nil
	})
	return policy, err
}
