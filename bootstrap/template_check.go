package bootstrap

import (
	"fmt"
	"text/template"
	"text/template/parse"
)

// checkParams refuses a template that reads a top-level parameter params does not hold: `.name`
// where dot is the parameter map, and `$.name` anywhere. Inside range and with bodies, and in
// templates run by {{template}}, dot is something else and is not checked. Nested lookups
// (.config.X) are left to text/template. {{define}}d templates are not checked: their dot and $
// are whatever the caller passes.
func checkParams(t *template.Template, params map[string]any) error {
	c := paramChecker{params: params, tree: t.Tree}
	if t.Tree != nil && t.Root != nil {
		c.list(t.Root, true)
	}
	return c.err
}

type paramChecker struct {
	params map[string]any
	tree   *parse.Tree
	err    error
}

func (c *paramChecker) missing(n parse.Node, name string) {
	if c.err != nil {
		return
	}
	if _, ok := c.params[name]; ok {
		return
	}
	loc, _ := c.tree.ErrorContext(n)
	c.err = fmt.Errorf("%s: parameter %q is not one Wingman provides", loc, name)
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
