package server

import (
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func TestQuantile(t *testing.T) {
	bucket := func(upper float64, n uint64) *dto.Bucket {
		return &dto.Bucket{UpperBound: proto.Float64(upper), CumulativeCount: proto.Uint64(n)}
	}
	// 10 in (0, 1s], 10 in (1s, 3s], none beyond.
	h := &dto.Histogram{SampleCount: proto.Uint64(20), Bucket: []*dto.Bucket{bucket(1, 10), bucket(3, 20), bucket(math.Inf(1), 20)}}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, time.Second}, {0.25, 500 * time.Millisecond}, {0.75, 2 * time.Second}, {0.95, 2800 * time.Millisecond}} {
		if got := quantile(c.q, h); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	over := &dto.Histogram{SampleCount: proto.Uint64(4), Bucket: []*dto.Bucket{bucket(1, 1), bucket(math.Inf(1), 4)}}
	if got := quantile(0.95, over); got != time.Second {
		t.Errorf("a quantile past the last bound = %v, want that bound", got)
	}
	if got := quantile(0.5, &dto.Histogram{}); got != 0 {
		t.Errorf("quantile of nothing = %v", got)
	}
}
