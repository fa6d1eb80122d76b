package bootstrap

import (
	"bytes"
	"os"
	"testing"

	"github.com/wingman-mesh/wingman/bootstrap/internal/jsongen"
)

// TestGeneratedCurrent regenerates json.gen.go from the struct tags and compares it with the
// committed file: run `go generate ./bootstrap` when it fails.
func TestGeneratedCurrent(t *testing.T) {
	want, err := jsongen.Build(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(jsongen.Output)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate ./bootstrap", jsongen.Output)
	}
}
