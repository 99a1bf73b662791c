package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal: a progress bar redraws one
// line in place there, and anywhere else it would fill a log with escapes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressBar shows how far a long action has come: on a terminal one
// line redrawn in place, elsewhere one plain line per update.
type progressBar struct {
	w     io.Writer
	tty   bool
	label string // the action, such as "run"
	drawn bool
}

const barWidth = 30

// show reports done of total tasks, failed of them without effect. total
// may be an estimate (done can pass it): the bar then stays full.
func (p *progressBar) show(done, total, failed int64) {
	pct := int64(100)
	if total > 0 {
		pct = min(100, done*100/total)
	}
	tail := ""
	if failed > 0 {
		tail = fmt.Sprintf(", %d failed", failed)
	}
	if !p.tty {
		_, _ = fmt.Fprintf(p.w, "%s: %d/%d tasks%s\n", p.label, done, total, tail)
		return
	}
	filled := int(pct * barWidth / 100)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", barWidth-filled)
	// \r returns to the line's start and \x1b[K clears what a longer
	// earlier line left.
	_, _ = fmt.Fprintf(p.w, "\r%s [%s] %3d%% %d/%d%s\x1b[K", p.label, bar, pct, done, total, tail)
	p.drawn = true
}

// end finishes the bar's line, so that what follows starts on its own.
func (p *progressBar) end() {
	if p.drawn {
		_, _ = io.WriteString(p.w, "\n")
		p.drawn = false
	}
}
