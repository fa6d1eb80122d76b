// Command genjson writes bootstrap/json.gen.go (see package jsongen); run by `go generate
// ./bootstrap` from package bootstrap's directory.
package main

import (
	"fmt"
	"os"

	"github.com/wingman-mesh/wingman/bootstrap/internal/jsongen"
)

func main() {
	src, err := jsongen.Build(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "genjson:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(jsongen.Output, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genjson:", err)
		os.Exit(1)
	}
}
