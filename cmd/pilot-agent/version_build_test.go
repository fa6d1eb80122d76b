package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfileBuild reads the Dockerfile's ARG defaults and its `go build` RUN line (continuations
// joined), expands ${VAR} with the defaults overridden by buildArgs (as `docker build
// --build-arg` does) and returns the go build arguments, with -o replaced by out.
func dockerfileBuild(t *testing.T, buildArgs map[string]string, out string) (env, args []string) {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.ReplaceAll(string(raw), "\\\n", " ")
	vars := map[string]string{}
	var run string
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if def, ok := strings.CutPrefix(line, "ARG "); ok {
			if k, v, ok := strings.Cut(def, "="); ok {
				if _, seen := vars[k]; !seen {
					vars[k] = v
				}
			}
		}
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, " go build ") {
			run = strings.TrimPrefix(line, "RUN ")
		}
	}
	if run == "" {
		t.Fatal("Dockerfile: no RUN ... go build line")
	}
	for k, v := range buildArgs {
		vars[k] = v
	}
	expanded := regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(run, func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok {
			t.Fatalf("Dockerfile build line uses %s, which no ARG defines", m)
		}
		return v
	})
	// Split as sh does for this line: blanks separate words, double quotes group them.
	var words []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range expanded {
		switch {
		case r == '"':
			inQuote, inWord = !inQuote, true
		case (r == ' ' || r == '\t') && !inQuote:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	for len(words) > 0 && strings.Contains(words[0], "=") {
		env, words = append(env, words[0]), words[1:]
	}
	if len(words) < 2 || words[0] != "go" || words[1] != "build" {
		t.Fatalf("Dockerfile build line is not `go build`: %q", expanded)
	}
	args = words[1:]
	for i := range args {
		if args[i] == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	return env, args
}

// TestDockerfileStampsReportedIstioVersion: the image built with --build-arg ISTIO_VERSION=X
// reports X both in `pilot-agent version` and as the bootstrap's ISTIO_VERSION node metadata
// (what istiod reads to choose what to send). The binary is built with the Dockerfile's own
// build line; 1.26.3 differs from go.mod's istio.io/api, so an unstamped build cannot pass.
func TestDockerfileStampsReportedIstioVersion(t *testing.T) {
	const want = "1.26.3"
	bin := filepath.Join(t.TempDir(), "pilot-agent")
	env, args := dockerfileBuild(t, map[string]string{"ISTIO_VERSION": want}, bin)
	build := exec.Command("go", args...)
	build.Dir, build.Env = "../..", append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	p := newPod(t, "")
	p.bin = bin
	code, out, stderr := p.run(t, "version", "--short")
	if first, _, _ := strings.Cut(out, "\n"); code != 0 || first != want {
		t.Errorf("version --short: exit %d, out %q, stderr %q; want first line %s", code, out, stderr, want)
	}
	if got := bootstrapMetadata(t, p)["ISTIO_VERSION"]; got != want {
		t.Errorf("bootstrap node metadata ISTIO_VERSION %v, want %s", got, want)
	}
}

// TestMakeBuildStampsGitRevision: `make build` stamps the commit as Istio's build does
// (common/scripts/report_build_info.sh: `git rev-parse HEAD`, "-dirty" when `git status
// --porcelain` lists anything, buildStatus Clean or Modified), never "unknown".
func TestMakeBuildStampsGitRevision(t *testing.T) {
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	porcelain, err := exec.Command("git", "-C", "../..", "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantRev, wantStatus := strings.TrimSpace(string(head)), "Clean"
	if len(strings.TrimSpace(string(porcelain))) > 0 {
		wantRev, wantStatus = wantRev+"-dirty", "Modified"
	}
	bin := filepath.Join(t.TempDir(), "pilot-agent")
	mk := exec.Command("make", "--no-print-directory", "build", "BIN="+bin)
	mk.Dir = "../.."
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	p := newPod(t, "")
	p.bin = bin
	code, out, stderr := p.run(t, "version", "-o", "json")
	var v versions
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("version -o json: exit %d, %v, stderr %q", code, err, stderr)
	}
	for _, b := range []buildInfo{v.Client, v.Wingman} {
		if b.GitRevision != wantRev || b.BuildStatus != wantStatus {
			t.Errorf("GitRevision %q BuildStatus %q, want %q %q", b.GitRevision, b.BuildStatus, wantRev, wantStatus)
		}
	}
}
