package perf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

const module = "github.com/wingman-mesh/wingman"

// BuildTags and BuildFlags are how `make build` builds the agent; the harness builds its
// helpers the same way.
var buildArgs = []string{"-tags", "disable_pgv,grpcnotrace", "-trimpath", "-ldflags=-s -w"}

// Build builds the stand-in, the agent child and the floor forwarder into dir (and pilot-agent too when agent is
// true) with the go tool; it must run inside the module.
func Build(ctx context.Context, dir string, agent bool) (Bins, error) {
	b := Bins{Child: filepath.Join(dir, "agentchild"), Stub: filepath.Join(dir, "envoystub"), Floor: filepath.Join(dir, "floorfwd")}
	pkgs := [][2]string{{b.Child, module + "/lab/agentchild"}, {b.Stub, module + "/lab/envoystub"}, {b.Floor, module + "/lab/floorfwd"}}
	if agent {
		b.Agent = filepath.Join(dir, "pilot-agent")
		pkgs = append(pkgs, [2]string{b.Agent, module + "/cmd/pilot-agent"})
	}
	for _, p := range pkgs {
		args := append(append([]string{"build"}, buildArgs...), "-o", p[0], p[1])
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as `make build` ships it
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("build %s: %w\n%s", p[1], err, out)
		}
	}
	return b, nil
}
