package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Set with -ldflags "-X main.version=... -X main.gitRevision=... -X main.gitTag=...".
var (
	version     = ""
	gitRevision = ""
	gitTag      = ""
)

// buildInfo mirrors Istio's version.BuildInfo fields.
type buildInfo struct {
	Version       string `json:"version"`
	GitRevision   string `json:"revision"`
	GolangVersion string `json:"golang_version"`
	BuildStatus   string `json:"status"`
	GitTag        string `json:"tag"`
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, GitRevision: gitRevision, GitTag: gitTag, GolangVersion: runtime.Version(), BuildStatus: "Clean"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.GitRevision == "":
				b.GitRevision = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
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

func buildVersion() string { return currentBuild().Version }

func versionFlagSet() (*pflag.FlagSet, *bool, *string) {
	fs, _ := newRootFlagSet("version", false)
	short := fs.BoolP("short", "s", false, "use --short=false to generate full version information")
	output := fs.StringP("output", "o", "", "one of 'yaml' or 'json'")
	return fs, short, output
}

func runVersion(args []string, sio stdio) int {
	fs, short, output := versionFlagSet()
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			commandUsage(sio.out, "version", "Prints out build version information", fs)
			return 0
		}
		return usageError(sio, "pilot-agent version", err)
	}
	b := currentBuild()
	switch *output {
	case "":
		if *short {
			fmt.Fprintln(sio.out, b.Version)
		} else {
			fmt.Fprintf(sio.out, "version.BuildInfo{Version:%q, GitRevision:%q, GolangVersion:%q, BuildStatus:%q, GitTag:%q}\n",
				b.Version, b.GitRevision, b.GolangVersion, b.BuildStatus, b.GitTag)
		}
	case "json", "yaml":
		doc := map[string]buildInfo{"clientVersion": b}
		j, err := json.MarshalIndent(doc, "", "  ")
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
