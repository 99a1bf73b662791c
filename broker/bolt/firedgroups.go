package bolt

import "slices"

// firedGroups are a queue's fired groups waiting for a session that
// handles their type: one line per type, each oldest first. A session's
// send round asks how many wait for its types and leases the oldest of
// them, so each line keeps its length and the rounds look at the lines
// of their own types only: a backlog of fired groups (workers of a batch
// type fell behind) costs a round nothing per group, and one of a type the
// session does not take is never walked.
//
// Under a cap on ACTIVE tasks, every task that leaves ACTIVE asks whether a
// fired group fits in the room it leaves (firedGroupFitsLocked), and the
// smallest group fits if any does: so the fewest live members of a fired
// group are kept, with how many groups have that many, and counted again
// only when the last of those leaves the lines.
type firedGroups struct {
	lines map[string]*firedLine
	n     int    // groups in all lines
	seq   uint64 // the last firing's sequence number (group.fireSeq)
	// fewest is the fewest live members (> 0) of a group in the lines, and
	// fewestN how many groups have that many (0: none has any), while
	// fewestKnown; otherwise they are counted on the next ask.
	fewest, fewestN int
	fewestKnown     bool
}

// firedLine is the fired groups of one type, in the order they fired.
type firedLine struct {
	typ    string
	groups []*group
}

// push appends a group that just fired to its type's line.
func (f *firedGroups) push(g *group) {
	if f.lines == nil {
		f.lines = make(map[string]*firedLine)
	}
	l := f.lines[g.id.typ]
	if l == nil {
		l = &firedLine{typ: g.id.typ}
		f.lines[g.id.typ] = l
	}
	f.seq++
	g.fireSeq = f.seq
	l.groups = append(l.groups, g)
	f.n++
	f.counted(g.live)
}

// shrank accounts for a group in the lines whose live members went from
// was to now.
func (f *firedGroups) shrank(was, now int) {
	f.counted(now)
	f.uncounted(was)
}

// counted adds a group of live members to the fewest's account.
func (f *firedGroups) counted(live int) {
	switch {
	case live <= 0 || !f.fewestKnown:
	case f.fewestN == 0 || live < f.fewest:
		f.fewest, f.fewestN = live, 1
	case live == f.fewest:
		f.fewestN++
	}
}

// uncounted takes a group of live members out of the fewest's account.
func (f *firedGroups) uncounted(live int) {
	if live <= 0 || !f.fewestKnown || live != f.fewest {
		return
	}
	if f.fewestN--; f.fewestN == 0 {
		f.fewestKnown = f.n == 0 // the next fewest is not known
	}
}

// fewestLive returns the fewest live members of a group in the lines;
// false when no group has any.
func (f *firedGroups) fewestLive() (int, bool) {
	if !f.fewestKnown {
		f.fewest, f.fewestN, f.fewestKnown = 0, 0, true
		f.all(func(g *group) bool { f.counted(g.live); return true })
	}
	return f.fewest, f.fewestN > 0
}

// len is how many fired groups wait, of every type.
func (f *firedGroups) len() int { return f.n }

// waiting is how many fired groups wait for a session of types.
func (f *firedGroups) waiting(types []string) int {
	n := 0
	for _, typ := range types {
		if l := f.lines[typ]; l != nil {
			n += len(l.groups)
		}
	}
	return n
}

// all calls fn with every fired group, each type's oldest first.
func (f *firedGroups) all(fn func(*group) bool) {
	for _, l := range f.lines {
		for _, g := range l.groups {
			if !fn(g) {
				return
			}
		}
	}
}

// reset forgets every fired group.
func (f *firedGroups) reset() { *f = firedGroups{} }

// firedScan walks the fired groups of a session's types in the order they
// fired, across the types' lines, taking some out of their lines and
// keeping the others in place (LeaseGroups). Only the groups it reached
// are moved when it ends, so a round that leases the oldest group of a
// long line costs what it looked at, not the line.
type firedScan struct {
	f     *firedGroups
	lines []lineScan
}

// lineScan is a firedScan's place in one line: groups[:next] were looked
// at, and kept holds those of them that stay.
type lineScan struct {
	l    *firedLine
	next int
	kept []*group
}

// scan starts a walk over the lines of types.
func (f *firedGroups) scan(types []string) *firedScan {
	s := &firedScan{f: f}
	for _, typ := range types {
		if l := f.lines[typ]; l != nil && !slices.ContainsFunc(s.lines, func(x lineScan) bool { return x.l == l }) {
			s.lines = append(s.lines, lineScan{l: l})
		}
	}
	return s
}

// next returns the oldest group not looked at yet, of any of the scan's
// lines, and which line it is in; false when none is left.
func (s *firedScan) next() (*group, int, bool) {
	best := -1
	for i := range s.lines {
		ls := &s.lines[i]
		if ls.next == len(ls.l.groups) {
			continue
		}
		if best < 0 || ls.l.groups[ls.next].fireSeq < s.lines[best].l.groups[s.lines[best].next].fireSeq {
			best = i
		}
	}
	if best < 0 {
		return nil, 0, false
	}
	ls := &s.lines[best]
	g := ls.l.groups[ls.next]
	ls.next++
	return g, best, true
}

// keep leaves the group next just returned from line i in its line, in
// its place.
func (s *firedScan) keep(i int, g *group) { s.lines[i].kept = append(s.lines[i].kept, g) }

// done rewrites each line the scan reached: the groups it kept, in their
// order, where the ones it looked at were, then those it did not reach.
// A line left empty is forgotten.
func (s *firedScan) done() {
	for _, ls := range s.lines {
		gs := ls.l.groups
		k := 0
		for _, g := range gs[:ls.next] { // kept is in line order
			if k < len(ls.kept) && ls.kept[k] == g {
				k++
				continue
			}
			s.f.n--
			s.f.uncounted(g.live)
		}
		start := ls.next - len(ls.kept)
		copy(gs[start:ls.next], ls.kept)
		clear(gs[:start]) // let the groups that left be collected
		ls.l.groups = gs[start:]
		if len(ls.l.groups) == 0 {
			delete(s.f.lines, ls.l.typ)
		}
	}
}
