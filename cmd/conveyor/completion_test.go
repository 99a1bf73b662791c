package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompleteCandidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{""}, "backup bench compact completion copy cron enqueue group info migrate queue release server stats task version workers"},
		{[]string{"ta"}, "task"},
		{[]string{"task", ""}, "archive cancel delete get ls run"},
		{[]string{"task", "ls", "--st"}, "--state"},
		{[]string{"task", "ls", "--state", "a"}, "active aggregating all archived"},
		{[]string{"task", "ls", "--state=p"}, "--state=pending"},
		{[]string{"task", "ls", "--queue", ""}, ""}, // a free value
		{[]string{"task", "ls", "--queue", "q", "--json", "--l"}, "--limit"},
		{[]string{"task", "run", "--queue", "q", "--state", "arch"}, "archived"},
		{[]string{"queue", ""}, "config delete history ls pause resume stats"},
		{[]string{"queue", "ls", "--"}, "--addr --help --json --token --token-file --wide"},
		{[]string{"completion", ""}, "bash fish zsh"},
		{[]string{"server", "--log-level", ""}, "debug error info warn"},
		{[]string{"backup", ""}, pathCandidate},
		{[]string{"backup", "--token-file", ""}, pathCandidate},
		{[]string{"compact", "--data-dir=/v"}, pathCandidate},
		{[]string{"task", "get", "ID", ""}, ""},
		{[]string{"__comp"}, ""}, // hidden
		// The connection flags may come before the command.
		{[]string{"--"}, "--addr --help --json --token --token-file"},
		{[]string{"--addr", "http://h:1", "--json", "queue", ""}, "config delete history ls pause resume stats"},
		{[]string{"--addr=http://h:1", "ta"}, "task"},
		{[]string{"--token-file", ""}, pathCandidate},
		{[]string{"--addr", ""}, ""},
	} {
		out, err := runCLI(t, "", append([]string{"__complete", "--"}, tc.words...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(out), " "); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.words, got, tc.want)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := mustRun(t, "completion", shell); out != completionScripts[shell] || !strings.Contains(out, "__complete --") {
			t.Errorf("completion %s printed:\n%s", shell, out)
		}
	}
	if _, err := runCLI(t, "", "completion", "tcsh"); exitCode(err) != exitUsage {
		t.Errorf("completion tcsh: %v", err)
	}
}

// TestBashCompletion runs the bash script in bash against the built binary,
// as a shell does when Tab is pressed.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bin := conveyorBinary(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "conveyor.bash")
	if err := os.WriteFile(script, []byte(completionScripts["bash"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "backup.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, want string }{
		{"conveyor ta", "task"},
		{"conveyor task ", "archive cancel delete get ls run"},
		{"conveyor task ls --state=pe", "pending"}, // bash replaces only what follows '='
		{"conveyor task ls --state pe", "pending"},
		{"conveyor backup " + dir + "/back", dir + "/backup.db"},
		{"conveyor queue x", ""},
	} {
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", `source "$0"; COMP_LINE=$1; COMP_POINT=${#1}; _conveyor; printf '%s\n' "${COMPREPLY[@]}"`, script, tc.line)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		if got := strings.Join(strings.Fields(string(out)), " "); got != tc.want {
			t.Errorf("%q completes to %q, want %q", tc.line, got, tc.want)
		}
	}
}
