package bootstrap

import (
	"slices"
	"text/template"
	"text/template/parse"
)

// UnknownParam is a top-level template parameter the stamped release's agent never passes.
type UnknownParam struct {
	Name     string // the parameter, as the template reads it (.name or $.name)
	Location string // template:line:col of its first use
}

// unknownParams lists, once each in order of first use, the top-level parameters t reads that
// known does not define: `.name` where dot is the parameter map, and `$.name` anywhere. Inside
// range and with bodies, and in templates run by {{template}}, dot is something else and is not
// looked at. Nested lookups (.config.X) are left to text/template. {{define}}d templates are not
// looked at: their dot and $ are whatever the caller passes.
func unknownParams(t *template.Template, known func(string) bool) []UnknownParam {
	c := paramChecker{known: known, tree: t.Tree}
	if t.Tree != nil && t.Root != nil {
		c.list(t.Root, true)
	}
	return c.found
}

type paramChecker struct {
	known func(string) bool
	tree  *parse.Tree
	found []UnknownParam
}

func (c *paramChecker) missing(n parse.Node, name string) {
	if c.known(name) || slices.ContainsFunc(c.found, func(u UnknownParam) bool { return u.Name == name }) {
		return
	}
	loc, _ := c.tree.ErrorContext(n)
	c.found = append(c.found, UnknownParam{Name: name, Location: loc})
}

func (c *paramChecker) list(l *parse.ListNode, dotIsRoot bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		c.node(n, dotIsRoot)
	}
}

func (c *paramChecker) node(n parse.Node, dotIsRoot bool) {
	switch n := n.(type) {
	case *parse.ActionNode:
		c.pipe(n.Pipe, dotIsRoot)
	case *parse.IfNode:
		c.pipe(n.Pipe, dotIsRoot)
		c.list(n.List, dotIsRoot)
		c.list(n.ElseList, dotIsRoot)
	case *parse.RangeNode:
		c.pipe(n.Pipe, dotIsRoot)
		c.list(n.List, false)
		c.list(n.ElseList, dotIsRoot)
	case *parse.WithNode:
		c.pipe(n.Pipe, dotIsRoot)
		c.list(n.List, false)
		c.list(n.ElseList, dotIsRoot)
	case *parse.TemplateNode:
		c.pipe(n.Pipe, dotIsRoot)
	case *parse.ListNode:
		c.list(n, dotIsRoot)
	case *parse.PipeNode:
		c.pipe(n, dotIsRoot)
	case *parse.FieldNode:
		if dotIsRoot && len(n.Ident) > 0 {
			c.missing(n, n.Ident[0])
		}
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			c.missing(n, n.Ident[1])
		}
	case *parse.ChainNode:
		c.node(n.Node, dotIsRoot)
	case *parse.CommandNode:
		for _, a := range n.Args {
			c.node(a, dotIsRoot)
		}
	}
}

func (c *paramChecker) pipe(p *parse.PipeNode, dotIsRoot bool) {
	if p == nil {
		return
	}
	for _, cmd := range p.Cmds {
		c.node(cmd, dotIsRoot)
	}
}
