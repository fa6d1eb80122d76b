// Command gendesc writes envoyproto's embedded descriptor set (run by go generate in
// bootstrap/envoyproto): gendesc OUTPUT.
package main

import (
	"fmt"
	"os"

	"github.com/wingman-mesh/wingman/bootstrap/envoyproto/internal/descset"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendesc OUTPUT")
		os.Exit(2)
	}
	b, err := descset.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
