// Command gendesc writes cache's embedded descriptor set (run by go generate in cache):
// gendesc OUTPUT.
package main

import (
	"github.com/wingman-mesh/wingman/cache/internal/wasmdesc"
	gen "github.com/wingman-mesh/wingman/internal/descset"
)

func main() { gen.Generate(wasmdesc.Build) }
