package admin_test

// The harness of the browser tests: Debian's Chromium, headless, driven by
// chromedp over its DevTools pipe, against a real server on loopback.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// stepTimeout bounds each step of a browser test: long enough for a slow CI
// machine under the race detector, short enough to fail with a clear
// message rather than at the test binary's timeout.
const stepTimeout = 30 * time.Second

// browser is a headless Chromium tab, and the base URL of the server under
// test.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// newBrowser starts a headless Chromium with a fresh profile and returns
// its first tab, pointed at nothing yet. The browser is closed at cleanup.
// Without Chromium the test fails: the browser tests are part of CI.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the dashboard's browser tests need Chromium at %s (Debian: apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// This machine's network is closed: the browser must not try to
		// reach anything but the server under test.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("lang", "en-US"),
		chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(profile),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	// Registered after t.TempDir, so it runs before the profile is removed:
	// the browser and its child processes are gone by then.
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first action starts the browser; its lifetime is ctx's, so it
	// runs without a deadline, guarded by one here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("chromium did not start within 60s")
	}
	b := &browser{t: t, ctx: ctx, base: base}
	b.do("set the viewport", chromedp.EmulateViewport(1280, 800))
	return b
}

// do runs steps within stepTimeout, failing the test with what was being
// done.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.pageText())
	}
}

// pageText is the visible text of the page, for failure messages.
func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return "(the page's text could not be read: " + err.Error() + ")"
	}
	return "the page shows:\n" + s
}

// open loads a dashboard URL (a path such as "/ui/tasks/ID") as a new page
// load, as a shared link would.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, what, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.pageText())
	}
	return v
}

// text is the visible text of the first element sel matches, once visible.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(sel, chromedp.NodeVisible))
	if err != nil {
		b.t.Fatalf("read %s: %v\n%s", sel, err, b.pageText())
	}
	return strings.TrimSpace(s)
}

// attr is the attribute name of the first element sel matches, once present.
func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.AttributeValue(sel, name))
	if err != nil {
		b.t.Fatalf("read %s's %s: %v\n%s", sel, name, err, b.pageText())
	}
	return v.Value
}

// waitText waits until the element sel matches shows text containing want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.innerText.includes(%q); })()`, sel, want)
	b.do(fmt.Sprintf("wait for %s to show %q", sel, want),
		chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// waitTextIs waits until the element sel matches shows exactly want.
func (b *browser) waitTextIs(sel, want string) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.innerText.trim() === %q; })()`, sel, want)
	b.do(fmt.Sprintf("wait for %s to show exactly %q", sel, want),
		chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// colorScheme emulates the system's light or dark preference.
func (b *browser) colorScheme(scheme string) {
	b.t.Helper()
	b.do("emulate prefers-color-scheme: "+scheme, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	}))
}

// screenshots reports whether the test takes screenshots (see screenshot).
func screenshots() bool { return os.Getenv("CONVEYOR_SCREENSHOTS") != "" }

// screenshot saves the viewport as name.png in the directory
// CONVEYOR_SCREENSHOTS names; without it, it does nothing. `make
// screenshots` sets it to docs/screenshots.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if !screenshots() {
		return
	}
	dir := os.Getenv("CONVEYOR_SCREENSHOTS")
	// Let layout and the chart settle: two animation frames.
	b.do("settle before a screenshot", chromedp.Evaluate[chromedp.Void](
		`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise))
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
