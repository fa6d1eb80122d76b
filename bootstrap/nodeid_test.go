package bootstrap

import "testing"

// TestParseNodeIDTypes: every node type Istiod accepts parses (ParseServiceNodeWithMetadata
// checks IsApplicationNodeType, pilot/pkg/model/context.go at 1.30.3: sidecar, router, waypoint,
// ztunnel, agentgateway); another is refused.
func TestParseNodeIDTypes(t *testing.T) {
	for _, typ := range []string{"sidecar", "router", "waypoint", "ztunnel", "agentgateway"} {
		id, err := ParseNodeID(typ + "~10.0.0.1~pod.ns~ns.svc.cluster.local")
		if err != nil || string(id.Type) != typ {
			t.Errorf("%s: %+v, %v", typ, id, err)
		}
	}
	if _, err := ParseNodeID("gateway~10.0.0.1~pod.ns~ns.svc.cluster.local"); err == nil {
		t.Error("an unknown node type parsed")
	}
}
