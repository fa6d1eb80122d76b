// Command gendesc writes envoyproto's embedded descriptor set (run by go generate in
// bootstrap/envoyproto): gendesc OUTPUT.
package main

import (
	"github.com/wingman-mesh/wingman/bootstrap/envoyproto/internal/descset"
	gen "github.com/wingman-mesh/wingman/internal/descset"
)

func main() { gen.Generate(descset.Build) }
