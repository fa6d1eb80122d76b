package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// Set with -ldflags "-X main.istioVersion=... -X main.version=... -X main.gitRevision=... -X main.buildStatus=..."
// (the Makefile and the Dockerfile do). istioVersion is the one variable for the Istio release
// whose agent behaviour Wingman follows: `pilot-agent version` prints it and Istiod reads it from
// the node metadata (ISTIO_VERSION) to decide what it may send. Unstamped, it is the version of
// istio.io/api the binary is built against (Istio tags its API with its release number).
// version, gitRevision, buildStatus and gitTag are Wingman's own build: gitRevision is
// `git rev-parse HEAD` with "-dirty" when the tree has changes and buildStatus "Clean" or
// "Modified", as Istio's common/scripts/report_build_info.sh stamps its pkg/version.
var (
	istioVersion = ""
	version      = ""
	gitRevision  = ""
	buildStatus  = ""
	gitTag       = ""
)

// buildInfo mirrors Istio's version.BuildInfo fields.
type buildInfo struct {
	Version       string `json:"version"`
	GitRevision   string `json:"revision"`
	GolangVersion string `json:"golang_version"`
	BuildStatus   string `json:"status"`
	GitTag        string `json:"tag"`
}

// versions is what `pilot-agent version -o json|yaml` prints: Istio's clientVersion (the Istio
// release followed, with Wingman's build facts) and Wingman's own version.
type versions struct {
	Client  buildInfo `json:"clientVersion"`
	Wingman buildInfo `json:"wingmanVersion"`
}

// currentBuild is Wingman's own build.
func currentBuild() buildInfo {
	b := buildInfo{Version: version, GitRevision: gitRevision, GitTag: gitTag, GolangVersion: runtime.Version(), BuildStatus: buildStatus}
	stamped := b.BuildStatus != ""
	if !stamped {
		b.BuildStatus = "Clean"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.GitRevision == "":
				b.GitRevision = s.Value
			case s.Key == "vcs.modified" && s.Value == "true" && !stamped:
				b.BuildStatus = "Modified"
			}
		}
	}
	if b.Version == "" {
		b.Version = "unknown"
	}
	if b.GitRevision == "" {
		b.GitRevision = "unknown"
	}
	if b.GitTag == "" {
		b.GitTag = b.Version
	}
	return b
}

// compatIstioVersion is the Istio version the agent reports (node metadata ISTIO_VERSION).
func compatIstioVersion() string {
	if istioVersion != "" {
		return strings.TrimPrefix(istioVersion, "v")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "istio.io/api" {
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	// istio.io/api need not be linked at all: the ProxyConfig types were generated from it.
	return strings.TrimPrefix(meshapi.IstioAPIVersion, "v")
}

// istioBuild is Istio's BuildInfo as this agent reports it: Istio's version, Wingman's build.
func istioBuild() buildInfo {
	b := currentBuild()
	b.Version, b.GitTag = compatIstioVersion(), compatIstioVersion()
	return b
}

func buildVersion() string { return currentBuild().Version }

func versionFlagSet() (*pflag.FlagSet, *bool, *string) {
	fs, _ := newRootFlagSet("version")
	short := fs.BoolP("short", "s", false, "use --short=false to generate full version information")
	output := fs.StringP("output", "o", "", "one of 'yaml' or 'json'")
	return fs, short, output
}

// runVersion prints the Istio version followed and Wingman's own: --short prints Istio's on the
// first line (what Istio's tooling reads) and Wingman's on the second.
func runVersion(args []string, sio stdio) int {
	fs, short, output := versionFlagSet()
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			commandUsage(sio.out, "version", "Prints out build version information", fs)
			return 0
		}
		return usageError(sio, "pilot-agent version", err)
	}
	v := versions{Client: istioBuild(), Wingman: currentBuild()}
	switch *output {
	case "":
		if *short {
			fmt.Fprintf(sio.out, "%s\nwingman %s\n", v.Client.Version, v.Wingman.Version)
		} else {
			for _, b := range []struct {
				name string
				b    buildInfo
			}{{"version", v.Client}, {"wingman", v.Wingman}} {
				fmt.Fprintf(sio.out, "%s.BuildInfo{Version:%q, GitRevision:%q, GolangVersion:%q, BuildStatus:%q, GitTag:%q}\n",
					b.name, b.b.Version, b.b.GitRevision, b.b.GolangVersion, b.b.BuildStatus, b.b.GitTag)
			}
		}
	case "json", "yaml":
		j, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			fmt.Fprintf(sio.err, "Error: %v\n", err)
			return exitFailure
		}
		if *output == "yaml" {
			y, err := yaml.JSONToYAML(j)
			if err != nil {
				fmt.Fprintf(sio.err, "Error: %v\n", err)
				return exitFailure
			}
			j = y
		}
		fmt.Fprintln(sio.out, string(j))
	default:
		return usageError(sio, "pilot-agent version", fmt.Errorf("--output must be 'yaml' or 'json'"))
	}
	return 0
}
