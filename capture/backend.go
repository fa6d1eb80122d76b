package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Runner runs one external command and returns its standard output. An error carries the exit
// status and standard error. Tests pass the real one; dry runs never build one.
type Runner interface {
	Run(ctx context.Context, stdin, name string, args ...string) (string, error)
}

// ExecRunner runs commands with os/exec.
type ExecRunner struct{}

var _ Runner = ExecRunner{}

// CmdError is a failed command: its line, exit code (-1 when it did not run) and stderr.
type CmdError struct {
	Cmd    string
	Code   int
	Stderr string
	Err    error
}

func (e *CmdError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("%s: exit %d: %s", e.Cmd, e.Code, msg)
}

func (e *CmdError) Unwrap() error { return e.Err }

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, stdin, name string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	if err := c.Run(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return out.String(), &CmdError{Cmd: name + " " + strings.Join(args, " "), Code: code, Stderr: errb.String(), Err: err}
	}
	return out.String(), nil
}

// Backend is one iptables binary set (iptables, -save, -restore) of one family.
type Backend struct {
	Bin, Save, Restore string
	Nft                bool   // nf_tables variant (no xtables lock)
	Version            [3]int // e.g. 1.8.9
	ExistingRules      bool   // the netns already had rules for this variant when detected
}

// needsLock is Istio's rule: legacy iptables from 1.6.2 on takes the xtables lock, so writes
// wait for it (--wait=30) instead of failing when another writer holds it.
func (b Backend) needsLock() bool {
	return !b.Nft && (b.Version[0] > 1 || b.Version[0] == 1 && (b.Version[1] > 6 || b.Version[1] == 6 && b.Version[2] >= 2))
}

func (b Backend) String() string {
	kind := "legacy"
	if b.Nft {
		kind = "nf_tables"
	}
	return fmt.Sprintf("%s v%d.%d.%d (%s)", b.Bin, b.Version[0], b.Version[1], b.Version[2], kind)
}

// versionRE is compiled on first use: the agent links this package but runs it only with capture
// enabled, and compiling at init cost every start.
var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`v([0-9]+)\.([0-9]+)(?:\.([0-9]+))?`) })

// probeRule is a rule that can never match (IANA-reserved protocol 255): adding and deleting it
// proves the kernel supports this variant.
var probeRule = []string{"-t", "filter", "-A", "INPUT", "-p", "255", "-j", "DROP"}

// probe checks one binary set: its save binary runs, reports a version, and the kernel takes a
// rule through it.
func probe(ctx context.Context, r Runner, bin string) (Backend, error) {
	b := Backend{Bin: bin, Save: bin + "-save", Restore: bin + "-restore"}
	dump, err := r.Run(ctx, "", b.Save)
	if err != nil {
		return b, err
	}
	b.ExistingRules = hasRules(dump)
	ver, err := r.Run(ctx, "", b.Save, "--version")
	if m := versionRE().FindStringSubmatch(ver); err == nil && m != nil {
		for i := 0; i < 3; i++ {
			b.Version[i], _ = strconv.Atoi(m[i+1])
		}
		b.Nft = strings.Contains(ver, "nf_tables")
	}
	if _, err := r.Run(ctx, "", bin, probeRule...); err != nil {
		return b, fmt.Errorf("%s has no kernel support here: %w", bin, err)
	}
	del := append([]string(nil), probeRule...)
	del[2] = "-D"
	_, _ = r.Run(ctx, "", bin, del...)
	return b, nil
}

// hasRules reports whether a save dump holds a rule or a chain of someone's. Istio counts
// lines (3 or more), which an empty table also has once anything touched it (even this
// probe's own test rule): a second run then saw "existing legacy rules" and flipped to legacy
// over the nft rules the first run wrote (Istio's #61020, which it answers by persisting the
// choice). Counting real rules and user chains makes the choice stable without state.
func hasRules(dump string) bool {
	for _, line := range strings.Split(dump, "\n") {
		if strings.HasPrefix(line, "-A ") {
			return true
		}
		if name, _, ok := strings.Cut(strings.TrimPrefix(line, ":"), " "); ok && line[0] == ':' && !builtinChains[name] {
			return true
		}
	}
	return false
}

// Detect picks the binary set for one family the way Istio does: legacy when legacy rules
// already exist in this network namespace (someone else programs legacy here, so must we),
// otherwise nf_tables, otherwise the plain binary. force ("legacy" or "nft",
// --force-iptables-binary) skips the choice.
func Detect(ctx context.Context, r Runner, v6 bool, force string) (Backend, error) {
	base := "iptables"
	if v6 {
		base = "ip6tables"
	}
	switch force {
	case "legacy", "nft":
		return probe(ctx, r, base+"-"+force)
	case "":
	default:
		return Backend{}, fmt.Errorf("force-iptables-binary %q: want legacy or nft", force)
	}
	if b, err := probe(ctx, r, base+"-legacy"); err == nil && b.ExistingRules {
		return b, nil
	}
	if b, err := probe(ctx, r, base+"-nft"); err == nil {
		return b, nil
	}
	b, err := probe(ctx, r, base)
	if err != nil {
		return Backend{}, fmt.Errorf("no usable %s (tried %[1]s-legacy, %[1]s-nft, %[1]s): %w", base, err)
	}
	return b, nil
}
