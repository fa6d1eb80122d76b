package capture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Programmer applies a Plan with iptables-restore and removes it again.
type Programmer struct {
	Runner Runner
	V4, V6 Backend // V6 is used only for plans with IPv6 rules
	IPv6   bool
	Log    *slog.Logger

	// Reconcile replaces existing ISTIO_ rules that differ from the plan (--reconcile);
	// without it such a netns is refused with an error and left untouched.
	Reconcile bool
	// ForceApply applies even when the plan is already in place (--force-apply).
	ForceApply bool
	// Retries is how often a failed iptables-restore is tried again (exit status 4, xtables'
	// resource problem: lock contention, a busy kernel), with RetryDelay doubling in between.
	Retries    int
	RetryDelay time.Duration
}

type family struct {
	v6    bool
	be    Backend
	rules []Rule
	name  string
}

func (p *Programmer) families(plan *Plan) []family {
	fs := []family{{false, p.V4, plan.V4, "IPv4"}}
	if p.IPv6 {
		fs = append(fs, family{true, p.V6, plan.V6, "IPv6"})
	}
	return fs
}

// write runs a command that takes the xtables lock (legacy iptables takes it for -C too).
func (p *Programmer) write(ctx context.Context, be Backend, stdin, bin string, args ...string) (string, error) {
	if be.needsLock() {
		args = append(args, "--wait=30")
	}
	return p.Runner.Run(ctx, stdin, bin, args...)
}

// Apply programs the plan. Already in place: nothing is changed. Absent: it is applied with one
// iptables-restore --noflush per family, each family retried on transient failure, then every
// rule is checked with iptables -C. Present but different: refused unless Reconcile, which
// removes the old capture first. A failure after one family was written removes what was
// written, so the netns is left with all of the capture or none of it.
func (p *Programmer) Apply(ctx context.Context, plan *Plan) error {
	fams := p.families(plan)
	residue, delta := false, false
	for _, f := range fams {
		r, d, err := p.state(ctx, f)
		if err != nil {
			return err
		}
		residue, delta = residue || r, delta || d
	}
	switch {
	case residue && !delta && !p.ForceApply:
		p.Log.Info("capture already in place, nothing to do")
		return nil
	case residue && delta && !p.Reconcile && !p.ForceApply:
		return errors.New("ISTIO_ chains or jumps already exist and differ from the requested capture; " +
			"run again with --reconcile to replace them, or remove them with --cleanup-only")
	case residue && delta && p.Reconcile:
		p.Log.Info("replacing an existing capture that differs (--reconcile)")
		for _, f := range fams {
			p.cleanupFamily(ctx, f)
		}
	}
	for i, f := range fams {
		if err := p.restore(ctx, f); err != nil {
			for _, done := range fams[:i+1] {
				p.cleanupFamily(ctx, done)
			}
			return err
		}
	}
	for _, f := range fams {
		if err := p.verify(ctx, f); err != nil {
			for _, done := range fams {
				p.cleanupFamily(ctx, done)
			}
			return err
		}
	}
	return nil
}

func (p *Programmer) restore(ctx context.Context, f family) error {
	text := RestoreText(f.rules)
	if text == "" {
		return nil
	}
	p.Log.Info("applying", "family", f.name, "binary", f.be.Restore, "rules", len(f.rules))
	delay := p.RetryDelay
	for attempt := 0; ; attempt++ {
		_, err := p.write(ctx, f.be, text, f.be.Restore, "--noflush")
		var ce *CmdError
		if err == nil {
			return nil
		}
		if attempt >= p.Retries || !errors.As(err, &ce) || ce.Code != 4 {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		p.Log.Warn("iptables-restore failed, retrying", "family", f.name, "attempt", attempt+1, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// verify checks every planned rule is in the kernel now.
func (p *Programmer) verify(ctx context.Context, f family) error {
	for _, r := range f.rules {
		if _, err := p.write(ctx, f.be, "", f.be.Bin, checkArgs(r)...); err != nil {
			return fmt.Errorf("%s: rule missing after apply: -t %s %s: %w", f.name, r.Table, strings.Join(ruleLine(r), " "), err)
		}
	}
	return nil
}

// state compares the netns with the plan, as Istio does: residue is any ISTIO_ chain or jump
// to one; delta is any difference (a planned chain missing or of another length, an extra
// ISTIO_ chain, a planned rule that iptables -C does not find).
func (p *Programmer) state(ctx context.Context, f family) (residue, delta bool, err error) {
	dump, err := p.Runner.Run(ctx, "", f.be.Save)
	if err != nil {
		return false, false, fmt.Errorf("%s: reading the current rules: %w", f.name, err)
	}
	cur := parseSave(dump)
	residue = cur.hasIstio()
	if !residue {
		return false, len(f.rules) > 0, nil
	}
	want := map[string]map[string]int{}
	for _, r := range f.rules {
		if want[r.Table] == nil {
			want[r.Table] = map[string]int{}
		}
		want[r.Table][r.Chain]++
	}
	for t, chains := range ownChains(f.rules) {
		for _, c := range chains {
			if _, ok := want[t][c]; !ok {
				want[t][c] = 0
			}
		}
	}
	for t, chains := range want {
		for c, n := range chains {
			if !strings.HasPrefix(c, "ISTIO_") {
				continue
			}
			rules, ok := cur.chains[t][c]
			if !ok || len(rules) != n {
				return true, true, nil
			}
		}
	}
	for t, chains := range cur.chains {
		for c := range chains {
			if _, ok := want[t][c]; !ok {
				return true, true, nil
			}
		}
	}
	for _, r := range f.rules {
		if _, err := p.write(ctx, f.be, "", f.be.Bin, checkArgs(r)...); err != nil {
			return true, true, nil
		}
	}
	return true, false, nil
}

// Cleanup removes the capture: the planned rules (so rules in built-in chains that the same
// flags added go too), then every jump to an ISTIO_ chain left in a built-in chain, then the
// ISTIO_ chains themselves. Errors of single deletions are expected (the rule may be gone) and
// ignored; what is left at the end is reported.
func (p *Programmer) Cleanup(ctx context.Context, plan *Plan) error {
	var errs []error
	for _, f := range p.families(plan) {
		p.cleanupFamily(ctx, f)
		dump, err := p.Runner.Run(ctx, "", f.be.Save)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			continue
		}
		if st := parseSave(dump); st.hasIstio() {
			errs = append(errs, fmt.Errorf("%s: ISTIO_ rules remain after clean-up:\n%s", f.name, dump))
		}
	}
	return errors.Join(errs...)
}

func (p *Programmer) cleanupFamily(ctx context.Context, f family) {
	for i := len(f.rules) - 1; i >= 0; i-- {
		_, _ = p.write(ctx, f.be, "", f.be.Bin, deleteArgs(f.rules[i])...)
	}
	dump, err := p.Runner.Run(ctx, "", f.be.Save)
	if err != nil {
		return
	}
	st := parseSave(dump)
	for _, j := range st.jumps {
		_, _ = p.write(ctx, f.be, "", f.be.Bin, append([]string{"-t", j.table, "-D"}, j.args...)...)
	}
	for _, pass := range []string{"-F", "-X"} {
		for t, chains := range st.chains {
			for c := range chains {
				_, _ = p.write(ctx, f.be, "", f.be.Bin, "-t", t, pass, c)
			}
		}
	}
}

// saveState is the Istio part of iptables-save output.
type saveState struct {
	chains map[string]map[string][]string // table -> ISTIO_ chain -> its rules
	jumps  []savedJump                    // rules in other chains that jump to an ISTIO_ chain
}

type savedJump struct {
	table string
	args  []string // chain and rule, without -A
}

func (s saveState) hasIstio() bool {
	for _, c := range s.chains {
		if len(c) > 0 {
			return true
		}
	}
	return len(s.jumps) > 0
}

// parseSave reads iptables-save output.
func parseSave(dump string) saveState {
	st := saveState{chains: map[string]map[string][]string{}}
	table := ""
	for _, line := range strings.Split(dump, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line == "COMMIT":
		case line[0] == '*':
			table = line[1:]
		case line[0] == ':':
			name, _, _ := strings.Cut(line[1:], " ")
			if strings.HasPrefix(name, "ISTIO_") {
				if st.chains[table] == nil {
					st.chains[table] = map[string][]string{}
				}
				if _, ok := st.chains[table][name]; !ok {
					st.chains[table][name] = nil
				}
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			if strings.HasPrefix(f[1], "ISTIO_") {
				if st.chains[table] == nil {
					st.chains[table] = map[string][]string{}
				}
				st.chains[table][f[1]] = append(st.chains[table][f[1]], line)
			} else if strings.HasPrefix(jumpTarget(f), "ISTIO_") {
				st.jumps = append(st.jumps, savedJump{table: table, args: f[1:]})
			}
		}
	}
	return st
}
