// Command gendesc writes cache's embedded descriptor set (run by go generate in cache):
// gendesc OUTPUT.
package main

import (
	"fmt"
	"os"

	"github.com/wingman-mesh/wingman/cache/internal/wasmdesc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendesc OUTPUT")
		os.Exit(2)
	}
	b, err := wasmdesc.Build()
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
