package tmpl

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/template/parse"
)

// maxDepth bounds template recursion ({{template}} calls nested in one another).
const maxDepth = 10000

// Template is a parsed template and the templates it defines. Immutable after Parse; Execute may
// be called concurrently.
type Template struct {
	name  string
	trees map[string]*parse.Tree
	funcs map[string]reflect.Value // the caller's functions and the builtins
	user  map[string]bool          // names of the caller's functions (they hide builtins)
}

// Parse parses text as a template named name; funcs are the functions it may call besides the
// builtins (each must return one value, or a value and an error).
func Parse(name, text string, funcs map[string]any) (*Template, error) {
	t := &Template{name: name, funcs: map[string]reflect.Value{}, user: map[string]bool{}}
	names := map[string]any{}
	for k, f := range builtins {
		t.funcs[k] = reflect.ValueOf(f)
		names[k] = f
	}
	for k, f := range funcs {
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Func {
			return nil, fmt.Errorf("template %s: function %q is a %s, not a function", name, k, v.Kind())
		}
		if err := checkFuncType(k, v.Type()); err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		t.funcs[k] = v
		t.user[k] = true
		names[k] = f
	}
	trees, err := parse.Parse(name, text, "", "", names)
	if err != nil {
		return nil, err
	}
	t.trees = trees
	return t, nil
}

func checkFuncType(name string, typ reflect.Type) error {
	switch {
	case typ.NumOut() == 1:
		return nil
	case typ.NumOut() == 2 && typ.Out(1) == errorType:
		return nil
	case typ.NumOut() == 2:
		return fmt.Errorf("invalid function signature for %s: second return value should be error; is %s", name, typ.Out(1))
	}
	return fmt.Errorf("function %s has %d return values; should be 1 or 2", name, typ.NumOut())
}

// Execute applies the template to data and writes the output to w.
func (t *Template) Execute(w io.Writer, data any) (err error) {
	tree := t.trees[t.name]
	if tree == nil || tree.Root == nil {
		return fmt.Errorf("template: %s: %q is an incomplete or empty template", t.name, t.name)
	}
	v, ok := data.(reflect.Value)
	if !ok {
		v = reflect.ValueOf(data)
	}
	s := &state{t: t, tree: tree, w: w, vars: []variable{{"$", v}}}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(execError)
			if !ok {
				panic(r)
			}
			err = e.err
		}
	}()
	s.walk(v, tree.Root)
	return nil
}

type variable struct {
	name  string
	value reflect.Value
}

// state is one execution. Owned by the Execute call.
type state struct {
	t     *Template
	tree  *parse.Tree
	w     io.Writer
	node  parse.Node // the node being evaluated, for error context
	vars  []variable
	depth int
}

// execError carries an execution error out of the walk (by panic, recovered in Execute).
type execError struct{ err error }

// control is how a walk ends: normally, or by {{break}} or {{continue}} inside a range.
type control int

const (
	ctlNone control = iota
	ctlBreak
	ctlContinue
)

var (
	errorType        = reflect.TypeFor[error]()
	stringerType     = reflect.TypeFor[fmt.Stringer]()
	reflectValueType = reflect.TypeFor[reflect.Value]()
	missingVal       = reflect.ValueOf(missingType{})
	errNoValue       = errors.New("no value")
)

// missingType marks "no final (piped) argument".
type missingType struct{}

func isMissing(v reflect.Value) bool { return v.IsValid() && v.Type() == missingVal.Type() }

func (s *state) at(n parse.Node) { s.node = n }

func (s *state) errorf(format string, args ...any) {
	name := s.tree.Name
	msg := fmt.Errorf(format, args...)
	if s.node == nil {
		panic(execError{fmt.Errorf("template: %s: %w", name, msg)})
	}
	loc, ctx := s.tree.ErrorContext(s.node)
	panic(execError{fmt.Errorf("template: %s: executing %q at <%s>: %w", loc, name, ctx, msg)})
}

func (s *state) mark() int { return len(s.vars) }

func (s *state) pop(mark int) { s.vars = s.vars[:mark] }

func (s *state) push(name string, v reflect.Value) { s.vars = append(s.vars, variable{name, v}) }

func (s *state) setVar(name string, v reflect.Value) {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			s.vars[i].value = v
			return
		}
	}
	s.errorf("undefined variable: %s", name)
}

// setTopVar sets the n-th variable from the top (1 is the last pushed).
func (s *state) setTopVar(n int, v reflect.Value) { s.vars[len(s.vars)-n].value = v }

func (s *state) varValue(name string) reflect.Value {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			return s.vars[i].value
		}
	}
	s.errorf("undefined variable: %s", name)
	return reflect.Value{}
}

func (s *state) walk(dot reflect.Value, node parse.Node) control {
	s.at(node)
	switch n := node.(type) {
	case *parse.ActionNode:
		v := s.evalPipeline(dot, n.Pipe)
		if len(n.Pipe.Decl) == 0 {
			s.printValue(n, v)
		}
	case *parse.BreakNode:
		return ctlBreak
	case *parse.ContinueNode:
		return ctlContinue
	case *parse.CommentNode:
	case *parse.IfNode:
		return s.walkIfOrWith(parse.NodeIf, dot, n.Pipe, n.List, n.ElseList)
	case *parse.ListNode:
		for _, c := range n.Nodes {
			if ctl := s.walk(dot, c); ctl != ctlNone {
				return ctl
			}
		}
	case *parse.RangeNode:
		s.walkRange(dot, n)
	case *parse.TemplateNode:
		s.walkTemplate(dot, n)
	case *parse.TextNode:
		if _, err := s.w.Write(n.Text); err != nil {
			s.errorf("%w", err)
		}
	case *parse.WithNode:
		return s.walkIfOrWith(parse.NodeWith, dot, n.Pipe, n.List, n.ElseList)
	default:
		s.errorf("unknown node: %s", node)
	}
	return ctlNone
}

func (s *state) walkIfOrWith(typ parse.NodeType, dot reflect.Value, pipe *parse.PipeNode, list, elseList *parse.ListNode) control {
	defer s.pop(s.mark())
	v := s.evalPipeline(dot, pipe)
	truth, ok := isTrue(indirectInterface(v))
	if !ok {
		s.errorf("if/with can't use %v", v)
	}
	if truth {
		if typ == parse.NodeWith {
			return s.walk(v, list)
		}
		return s.walk(dot, list)
	}
	if elseList != nil {
		return s.walk(dot, elseList)
	}
	return ctlNone
}

// IsTrue reports whether v is non-empty, as text/template's if does.
func isTrue(v reflect.Value) (truth, ok bool) {
	if !v.IsValid() {
		return false, true
	}
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() > 0, true
	case reflect.Bool:
		return v.Bool(), true
	case reflect.Complex64, reflect.Complex128:
		return v.Complex() != 0, true
	case reflect.Chan, reflect.Func, reflect.Pointer, reflect.UnsafePointer, reflect.Interface:
		return !v.IsNil(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() != 0, true
	case reflect.Float32, reflect.Float64:
		return v.Float() != 0, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() != 0, true
	case reflect.Struct:
		return true, true
	}
	return false, false
}

func (s *state) walkRange(dot reflect.Value, r *parse.RangeNode) {
	s.at(r)
	defer s.pop(s.mark())
	v, _ := indirect(s.evalPipeline(dot, r.Pipe))
	mark := s.mark()
	// one runs the body for one element; it reports whether the range stops ({{break}}).
	one := func(index, elem reflect.Value) bool {
		if len(r.Pipe.Decl) > 0 {
			if r.Pipe.IsAssign {
				if len(r.Pipe.Decl) > 1 {
					s.setVar(r.Pipe.Decl[0].Ident[0], index)
				} else {
					s.setVar(r.Pipe.Decl[0].Ident[0], elem)
				}
			} else {
				s.setTopVar(1, elem)
			}
		}
		if len(r.Pipe.Decl) > 1 {
			if r.Pipe.IsAssign {
				s.setVar(r.Pipe.Decl[1].Ident[0], elem)
			} else {
				s.setTopVar(2, index)
			}
		}
		ctl := s.walk(elem, r.List)
		s.pop(mark)
		return ctl == ctlBreak
	}
	switch v.Kind() {
	case reflect.Array, reflect.Slice:
		if v.Len() == 0 {
			break
		}
		for i := range v.Len() {
			if one(reflect.ValueOf(i), v.Index(i)) {
				break
			}
		}
		return
	case reflect.Map:
		if v.Len() == 0 {
			break
		}
		for _, k := range sortedKeys(v) {
			if one(k, v.MapIndex(k)) {
				break
			}
		}
		return
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if len(r.Pipe.Decl) > 1 {
			s.errorf("can't use %v to iterate over more than one variable", v)
		}
		n := rangeCount(v)
		if n <= 0 {
			break
		}
		for i := int64(0); i < n; i++ {
			iv := reflect.New(v.Type()).Elem()
			if v.CanInt() {
				iv.SetInt(i)
			} else {
				iv.SetUint(uint64(i))
			}
			if one(iv, iv) {
				break
			}
		}
		return
	case reflect.Invalid:
	default:
		s.errorf("range can't iterate over %v", v)
	}
	if r.ElseList != nil {
		s.walk(dot, r.ElseList)
	}
}

func rangeCount(v reflect.Value) int64 {
	if v.CanInt() {
		return v.Int()
	}
	if u := v.Uint(); u < 1<<62 {
		return int64(u)
	}
	return 1 << 62
}

func (s *state) walkTemplate(dot reflect.Value, t *parse.TemplateNode) {
	s.at(t)
	tree := s.t.trees[t.Name]
	if tree == nil || tree.Root == nil {
		s.errorf("template %q not defined", t.Name)
	}
	if s.depth >= maxDepth {
		s.errorf("exceeded maximum template depth (%v)", maxDepth)
	}
	dot = s.evalPipeline(dot, t.Pipe)
	inner := &state{t: s.t, tree: tree, w: s.w, vars: []variable{{"$", dot}}, depth: s.depth + 1}
	inner.walk(dot, tree.Root)
}

func (s *state) evalPipeline(dot reflect.Value, pipe *parse.PipeNode) reflect.Value {
	if pipe == nil {
		return reflect.Value{}
	}
	s.at(pipe)
	v := missingVal
	for _, cmd := range pipe.Cmds {
		v = s.evalCommand(dot, cmd, v)
		if v.Kind() == reflect.Interface && v.Type().NumMethod() == 0 {
			v = v.Elem() // look inside an any
		}
	}
	for _, d := range pipe.Decl {
		if pipe.IsAssign {
			s.setVar(d.Ident[0], v)
		} else {
			s.push(d.Ident[0], v)
		}
	}
	return v
}

func (s *state) notAFunction(args []parse.Node, final reflect.Value) {
	if len(args) > 1 || !isMissing(final) {
		s.errorf("can't give argument to non-function %s", args[0])
	}
}

func (s *state) evalCommand(dot reflect.Value, cmd *parse.CommandNode, final reflect.Value) reflect.Value {
	first := cmd.Args[0]
	switch n := first.(type) {
	case *parse.FieldNode:
		return s.evalFieldChain(dot, dot, n, n.Ident, cmd.Args, final)
	case *parse.ChainNode:
		return s.evalChainNode(dot, n, cmd.Args, final)
	case *parse.IdentifierNode:
		return s.evalFunction(dot, n, cmd, cmd.Args, final)
	case *parse.PipeNode:
		s.notAFunction(cmd.Args, final)
		return s.evalPipeline(dot, n)
	case *parse.VariableNode:
		return s.evalVariableNode(dot, n, cmd.Args, final)
	}
	s.at(first)
	s.notAFunction(cmd.Args, final)
	switch n := first.(type) {
	case *parse.BoolNode:
		return reflect.ValueOf(n.True)
	case *parse.DotNode:
		return dot
	case *parse.NilNode:
		s.errorf("nil is not a command")
	case *parse.NumberNode:
		return s.idealConstant(n)
	case *parse.StringNode:
		return reflect.ValueOf(n.Text)
	}
	s.errorf("can't evaluate command %q", first)
	return reflect.Value{}
}

// idealConstant types an untyped number by its syntax: complex, float (with a '.', exponent or
// 'p'), else int.
func (s *state) idealConstant(c *parse.NumberNode) reflect.Value {
	s.at(c)
	switch {
	case c.IsComplex:
		return reflect.ValueOf(c.Complex128)
	case c.IsFloat && !isHexInt(c.Text) && !isRuneInt(c.Text) && strings.ContainsAny(c.Text, ".eEpP"):
		return reflect.ValueOf(c.Float64)
	case c.IsInt:
		n := int(c.Int64)
		if int64(n) != c.Int64 {
			s.errorf("%s overflows int", c.Text)
		}
		return reflect.ValueOf(n)
	case c.IsUint:
		s.errorf("%s overflows int", c.Text)
	}
	return reflect.Value{}
}

func isRuneInt(s string) bool { return len(s) > 0 && s[0] == '\'' }

func isHexInt(s string) bool {
	return len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && !strings.ContainsAny(s, "pP")
}

func (s *state) evalChainNode(dot reflect.Value, chain *parse.ChainNode, args []parse.Node, final reflect.Value) reflect.Value {
	s.at(chain)
	if len(chain.Field) == 0 {
		s.errorf("internal error: no fields in evalChainNode")
	}
	if chain.Node.Type() == parse.NodeNil {
		s.errorf("indirection through explicit nil in %s", chain)
	}
	pipe := s.evalArg(dot, nil, chain.Node)
	return s.evalFieldChain(dot, pipe, chain, chain.Field, args, final)
}

func (s *state) evalVariableNode(dot reflect.Value, v *parse.VariableNode, args []parse.Node, final reflect.Value) reflect.Value {
	s.at(v)
	value := s.varValue(v.Ident[0])
	if len(v.Ident) == 1 {
		s.notAFunction(args, final)
		return value
	}
	return s.evalFieldChain(dot, value, v, v.Ident[1:], args, final)
}

func (s *state) evalFieldChain(dot, receiver reflect.Value, node parse.Node, ident []string, args []parse.Node, final reflect.Value) reflect.Value {
	n := len(ident)
	for i := range n - 1 {
		receiver = s.evalField(dot, ident[i], node, nil, missingVal, receiver)
	}
	return s.evalField(dot, ident[n-1], node, args, final, receiver)
}

func (s *state) evalFunction(dot reflect.Value, node *parse.IdentifierNode, cmd parse.Node, args []parse.Node, final reflect.Value) reflect.Value {
	s.at(node)
	fn, ok := s.t.funcs[node.Ident]
	if !ok {
		s.errorf("%q is not a defined function", node.Ident)
	}
	return s.evalCall(dot, fn, !s.t.user[node.Ident], cmd, node.Ident, args, final)
}

// evalField evaluates .name on receiver: a method this executor supports (see method), a struct
// field or a map key (missing keys give the element type's zero value).
func (s *state) evalField(dot reflect.Value, name string, node parse.Node, args []parse.Node, final, receiver reflect.Value) reflect.Value {
	if !receiver.IsValid() {
		return reflect.Value{}
	}
	typ := receiver.Type()
	receiver, isNil := indirect(receiver)
	if receiver.Kind() == reflect.Interface && isNil {
		s.errorf("nil pointer evaluating %s.%s", typ, name)
	}
	ptr := receiver
	if ptr.Kind() != reflect.Interface && ptr.Kind() != reflect.Pointer && ptr.CanAddr() {
		ptr = ptr.Addr()
	}
	if m, ok := method(ptr, name); ok {
		return s.evalCall(dot, m, false, node, name, args, final)
	}
	hasArgs := len(args) > 1 || !isMissing(final)
	switch receiver.Kind() {
	case reflect.Struct:
		if f, ok := receiver.Type().FieldByName(name); ok {
			field, err := receiver.FieldByIndexErr(f.Index)
			if !f.IsExported() {
				s.errorf("%s is an unexported field of struct type %s", name, typ)
			}
			if err != nil {
				s.errorf("%w", err)
			}
			if hasArgs {
				s.errorf("%s has arguments but cannot be invoked as function", name)
			}
			return field
		}
	case reflect.Map:
		key := reflect.ValueOf(name)
		if key.Type().AssignableTo(receiver.Type().Key()) {
			if hasArgs {
				s.errorf("%s is not a method but has arguments", name)
			}
			v := receiver.MapIndex(key)
			if !v.IsValid() {
				v = reflect.Zero(receiver.Type().Elem()) // missingkey=zero
			}
			return v
		}
	case reflect.Pointer:
		if et := receiver.Type().Elem(); et.Kind() == reflect.Struct {
			if _, ok := et.FieldByName(name); !ok {
				break
			}
		}
		if isNil {
			s.errorf("nil pointer evaluating %s.%s", typ, name)
		}
	}
	s.errorf("can't evaluate field %s in type %s", name, typ)
	return reflect.Value{}
}

func (s *state) evalCall(dot, fn reflect.Value, builtin bool, node parse.Node, name string, args []parse.Node, final reflect.Value) reflect.Value {
	if args != nil {
		args = args[1:] // the first is the function itself
	}
	typ := fn.Type()
	numIn := len(args)
	if !isMissing(final) {
		numIn++
	}
	numFixed := len(args)
	if typ.IsVariadic() {
		numFixed = typ.NumIn() - 1
		if numIn < numFixed {
			s.errorf("wrong number of args for %s: want at least %d got %d", name, typ.NumIn()-1, len(args))
		}
	} else if numIn != typ.NumIn() {
		s.errorf("wrong number of args for %s: want %d got %d", name, typ.NumIn(), numIn)
	}
	if err := checkFuncType(name, typ); err != nil {
		s.errorf("%w", err)
	}
	unwrap := func(v reflect.Value) reflect.Value {
		if v.Type() == reflectValueType {
			v = v.Interface().(reflect.Value)
		}
		return v
	}
	if builtin && (name == "and" || name == "or") { // short-circuit
		argType := typ.In(0)
		var v reflect.Value
		for _, a := range args {
			v = s.evalArg(dot, argType, a).Interface().(reflect.Value)
			if truth(v) == (name == "or") {
				return v
			}
		}
		if !final.Equal(missingVal) {
			v = unwrap(s.validateType(final, argType))
		}
		return v
	}
	argv := make([]reflect.Value, numIn)
	i := 0
	for ; i < numFixed && i < len(args); i++ {
		argv[i] = s.evalArg(dot, typ.In(i), args[i])
	}
	if typ.IsVariadic() {
		et := typ.In(typ.NumIn() - 1).Elem()
		for ; i < len(args); i++ {
			argv[i] = s.evalArg(dot, et, args[i])
		}
	}
	if !isMissing(final) {
		t := typ.In(typ.NumIn() - 1)
		if typ.IsVariadic() {
			if numIn-1 < numFixed {
				t = typ.In(numIn - 1)
			} else {
				t = t.Elem()
			}
		}
		argv[i] = s.validateType(final, t)
	}
	if builtin && name == "call" {
		callee := ""
		if len(args) == 0 {
			callee = final.String()
		} else {
			callee = args[0].String()
		}
		argv = append([]reflect.Value{reflect.ValueOf(callee)}, argv...)
		fn = reflect.ValueOf(call)
	}
	v, err := safeCall(fn, argv)
	if err != nil {
		s.at(node)
		s.errorf("error calling %s: %w", name, err)
	}
	return unwrap(v)
}

func canBeNil(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return true
	case reflect.Struct:
		return typ == reflectValueType
	}
	return false
}

// validateType makes v an argument of type typ: nil becomes typ's zero value, interfaces are
// looked into, and one pointer indirection or address-of is applied when that makes it fit.
func (s *state) validateType(v reflect.Value, typ reflect.Type) reflect.Value {
	if !v.IsValid() {
		if typ == nil {
			return reflect.ValueOf(nil)
		}
		if canBeNil(typ) {
			return reflect.Zero(typ)
		}
		s.errorf("invalid value; expected %s", typ)
	}
	if typ == reflectValueType && v.Type() != typ {
		return reflect.ValueOf(v)
	}
	if typ == nil || v.Type().AssignableTo(typ) {
		return v
	}
	if v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
		if v.Type().AssignableTo(typ) {
			return v
		}
	}
	switch {
	case v.Kind() == reflect.Pointer && v.Type().Elem().AssignableTo(typ):
		v = v.Elem()
		if !v.IsValid() {
			s.errorf("dereference of nil pointer of type %s", typ)
		}
	case reflect.PointerTo(v.Type()).AssignableTo(typ) && v.CanAddr():
		v = v.Addr()
	default:
		s.errorf("wrong type for value; expected %s; got %s", typ, v.Type())
	}
	return v
}

func (s *state) evalArg(dot reflect.Value, typ reflect.Type, n parse.Node) reflect.Value {
	s.at(n)
	switch a := n.(type) {
	case *parse.DotNode:
		return s.validateType(dot, typ)
	case *parse.NilNode:
		if canBeNil(typ) {
			return reflect.Zero(typ)
		}
		s.errorf("cannot assign nil to %s", typ)
	case *parse.FieldNode:
		return s.validateType(s.evalFieldChain(dot, dot, a, a.Ident, []parse.Node{n}, missingVal), typ)
	case *parse.VariableNode:
		return s.validateType(s.evalVariableNode(dot, a, nil, missingVal), typ)
	case *parse.PipeNode:
		return s.validateType(s.evalPipeline(dot, a), typ)
	case *parse.IdentifierNode:
		return s.validateType(s.evalFunction(dot, a, a, nil, missingVal), typ)
	case *parse.ChainNode:
		return s.validateType(s.evalChainNode(dot, a, nil, missingVal), typ)
	}
	switch typ.Kind() {
	case reflect.Bool:
		if b, ok := n.(*parse.BoolNode); ok {
			v := reflect.New(typ).Elem()
			v.SetBool(b.True)
			return v
		}
		s.errorf("expected bool; found %s", n)
	case reflect.Complex64, reflect.Complex128:
		if c, ok := n.(*parse.NumberNode); ok && c.IsComplex {
			v := reflect.New(typ).Elem()
			v.SetComplex(c.Complex128)
			return v
		}
		s.errorf("expected complex; found %s", n)
	case reflect.Float32, reflect.Float64:
		if c, ok := n.(*parse.NumberNode); ok && c.IsFloat {
			v := reflect.New(typ).Elem()
			v.SetFloat(c.Float64)
			return v
		}
		s.errorf("expected float; found %s", n)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if c, ok := n.(*parse.NumberNode); ok && c.IsInt {
			v := reflect.New(typ).Elem()
			v.SetInt(c.Int64)
			return v
		}
		s.errorf("expected integer; found %s", n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if c, ok := n.(*parse.NumberNode); ok && c.IsUint {
			v := reflect.New(typ).Elem()
			v.SetUint(c.Uint64)
			return v
		}
		s.errorf("expected unsigned integer; found %s", n)
	case reflect.String:
		if c, ok := n.(*parse.StringNode); ok {
			v := reflect.New(typ).Elem()
			v.SetString(c.Text)
			return v
		}
		s.errorf("expected string; found %s", n)
	case reflect.Interface:
		if typ.NumMethod() == 0 {
			return s.evalEmptyInterface(dot, n)
		}
	case reflect.Struct:
		if typ == reflectValueType {
			return reflect.ValueOf(s.evalEmptyInterface(dot, n))
		}
	}
	s.errorf("can't handle %s for arg of type %s", n, typ)
	return reflect.Value{}
}

func (s *state) evalEmptyInterface(dot reflect.Value, n parse.Node) reflect.Value {
	s.at(n)
	switch a := n.(type) {
	case *parse.BoolNode:
		return reflect.ValueOf(a.True)
	case *parse.DotNode:
		return dot
	case *parse.FieldNode:
		return s.evalFieldChain(dot, dot, a, a.Ident, nil, missingVal)
	case *parse.IdentifierNode:
		return s.evalFunction(dot, a, a, nil, missingVal)
	case *parse.NumberNode:
		return s.idealConstant(a)
	case *parse.StringNode:
		return reflect.ValueOf(a.Text)
	case *parse.VariableNode:
		return s.evalVariableNode(dot, a, nil, missingVal)
	case *parse.PipeNode:
		return s.evalPipeline(dot, a)
	}
	s.errorf("can't handle assignment of %s to empty interface argument", n)
	return reflect.Value{}
}

// indirect follows pointers and interfaces to a non-pointer value, stopping at a nil one.
func indirect(v reflect.Value) (reflect.Value, bool) {
	for ; v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface; v = v.Elem() {
		if v.IsNil() {
			return v, true
		}
	}
	return v, false
}

// indirectInterface returns the value inside an interface (nothing for a nil one), else v.
func indirectInterface(v reflect.Value) reflect.Value {
	if v.Kind() != reflect.Interface {
		return v
	}
	if v.IsNil() {
		return reflect.Value{}
	}
	return v.Elem()
}

func (s *state) printValue(n parse.Node, v reflect.Value) {
	s.at(n)
	iface, ok := printable(v)
	if !ok {
		s.errorf("can't print %s of type %s", n, v.Type())
	}
	if _, err := fmt.Fprint(s.w, iface); err != nil {
		s.errorf("%w", err)
	}
}

// printable is the value fmt prints for v: "<no value>" for nothing, pointers followed, and the
// address taken when only the pointer is a Stringer or error.
func printable(v reflect.Value) (any, bool) {
	if v.Kind() == reflect.Pointer {
		v, _ = indirect(v)
	}
	if !v.IsValid() {
		return "<no value>", true
	}
	if !v.Type().Implements(errorType) && !v.Type().Implements(stringerType) {
		if v.CanAddr() && (reflect.PointerTo(v.Type()).Implements(errorType) || reflect.PointerTo(v.Type()).Implements(stringerType)) {
			v = v.Addr()
		} else if v.Kind() == reflect.Chan || v.Kind() == reflect.Func {
			return nil, false
		}
	}
	return v.Interface(), true
}
