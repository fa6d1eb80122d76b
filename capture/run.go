package capture

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Options is one run of the programmer (pilot-agent istio-iptables).
type Options struct {
	Config Config

	DryRun         bool   // print what would be applied, run nothing
	SkipRuleApply  bool   // program nothing (with RunValidation: only validate)
	RunValidation  bool   // check the capture works (exit 126 when not)
	CleanupOnly    bool   // remove the capture instead of programming it
	Reconcile      bool   // replace an existing, different capture
	ForceApply     bool   // apply even when already in place
	NativeNftables bool   // program nftables with nft instead of iptables
	ForceBinary    string // "legacy" or "nft": the iptables variant, without detection
	// HostIPv6 is whether the pod's address is IPv6 (validation then probes over ::1/::6).
	HostIPv6 bool

	Runner Runner    // external commands (ExecRunner{} in production)
	Out    io.Writer // dry-run output
	Log    *slog.Logger
}

// ValidationError is a failed --run-validation (Istio exits 126 for it).
type ValidationError struct{ Err error }

func (e *ValidationError) Error() string { return e.Err.Error() }
func (e *ValidationError) Unwrap() error { return e.Err }

// Run programs (or removes, or prints) the capture, then validates it when asked.
func Run(ctx context.Context, o Options) error {
	cfg := &o.Config
	if err := cfg.Validate(); err != nil {
		return err
	}
	if !o.SkipRuleApply {
		var err error
		switch {
		case o.DryRun:
			err = o.dryRun()
		case o.NativeNftables:
			err = o.runNft(ctx)
		default:
			err = o.runIptables(ctx)
		}
		if err != nil {
			return err
		}
	}
	if o.RunValidation && !o.DryRun {
		if err := Validate(ctx, cfg, o.HostIPv6); err != nil {
			return &ValidationError{err}
		}
		o.Log.Info("validation passed")
	}
	return nil
}

func (o *Options) runIptables(ctx context.Context) error {
	cfg := &o.Config
	p := &Programmer{Runner: o.Runner, IPv6: cfg.IPv6, Log: o.Log, Reconcile: o.Reconcile, ForceApply: o.ForceApply,
		Retries: 3, RetryDelay: 500 * time.Millisecond}
	var err error
	if p.V4, err = Detect(ctx, o.Runner, false, o.ForceBinary); err != nil {
		return err
	}
	if cfg.IPv6 {
		if p.V6, err = Detect(ctx, o.Runner, true, o.ForceBinary); err != nil {
			return err
		}
	}
	if cfg.IPv6 {
		o.Log.Info("iptables backend", "ipv4", p.V4.String(), "ipv6", p.V6.String())
	} else {
		o.Log.Info("iptables backend", "ipv4", p.V4.String())
	}
	plan := Build(cfg)
	if o.CleanupOnly {
		RemoveRoutes(ctx, o.Runner, cfg)
		return p.Cleanup(ctx, plan)
	}
	if err := p.Apply(ctx, plan); err != nil {
		return err
	}
	if err := ConfigureRoutes(ctx, o.Runner, cfg); err != nil {
		return fmt.Errorf("configuring routes: %w", err)
	}
	return nil
}

// dryRun prints what a run would do, in the form it would be applied.
func (o *Options) dryRun() error {
	cfg := &o.Config
	w := o.Out
	if o.NativeNftables {
		if o.CleanupOnly {
			fmt.Fprintf(w, "# nft -f -\n%s", NftCleanupScript(NftTables(cfg)))
			return nil
		}
		fmt.Fprintf(w, "# nft -f -\n%s", NftScript(cfg))
	} else {
		plan := Build(cfg)
		fams := []struct {
			name, bin string
			rules     []Rule
		}{{"IPv4", "iptables", plan.V4}}
		if cfg.IPv6 {
			fams = append(fams, struct {
				name, bin string
				rules     []Rule
			}{"IPv6", "ip6tables", plan.V6})
		}
		for _, f := range fams {
			if o.CleanupOnly {
				fmt.Fprintf(w, "# %s: %s\n", f.name, f.bin)
				for i := len(f.rules) - 1; i >= 0; i-- {
					fmt.Fprintln(w, strings.Join(deleteArgs(f.rules[i]), " "))
				}
				for t, chains := range ownChains(f.rules) {
					for _, c := range chains {
						fmt.Fprintf(w, "-t %s -F %s\n-t %s -X %s\n", t, c, t, c)
					}
				}
				continue
			}
			fmt.Fprintf(w, "# %s: %s-restore --noflush\n%s", f.name, f.bin, RestoreText(f.rules))
		}
	}
	if !o.CleanupOnly {
		for _, c := range RouteCommands(cfg) {
			fmt.Fprintf(w, "# ip %s\n", strings.Join(c, " "))
		}
	}
	return nil
}
