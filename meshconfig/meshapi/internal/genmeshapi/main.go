// Command genmeshapi writes meshconfig/meshapi's generated files (run by go generate there):
// genmeshapi DIR.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi/internal/meshgen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: %s DIR\n", os.Args[0])
		os.Exit(2)
	}
	files, err := meshgen.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(os.Args[1], name), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
