// Command doccheck reports comments that name a Go identifier which does
// not exist: a renamed constant, a deleted function or field that a comment
// still explains. It exits 1 when it finds one, printing file:line and the
// name.
//
// Usage, from the repository root:
//
//	go run ./scripts/doccheck [DIR]
//
// DIR (default ".") and every nested module under it (a go.mod outside
// testdata) are checked, each with "go list -deps -test -json ./..." run in
// its own directory.
//
// What a comment is held to, in every .go file of the module's packages
// (tests and files for other platforms included):
//
//   - A Go doc link, found as go/doc/comment finds them, must name
//     something: "[Name]" anywhere in the module's code, "[pkg.Name]" an
//     exported declaration of pkg (an import of the file, or a package of
//     the module or the standard library by its name), "[Type.Member]" and
//     "[pkg.Type.Member]" a field or method of that type.
//   - A word written like a Go identifier, camelCase ("handoffWait") or
//     PascalCase of two or more words ("BodyTooLarge"), must appear in the
//     module's code (a declaration, a use, a struct tag or a string), among
//     the exported names of a package the module imports (with their fields
//     and methods), or in the allowlist of product names below.
//   - A qualified word, "pkg.Name" or "pkg.Type.Member", whose pkg is an
//     import of the file or a package of the module or the standard library,
//     must name an exported declaration of that package (and a field or
//     method of that type).
//   - A file a comment cites ("queue.go", "CHANGELOG.md") must exist: next to
//     the comment, at that path from the repository root, or anywhere in
//     the repository by that name.
//
// Not read, because there a name is someone else's or no name at all:
// quoted text ("..." and backquotes: JSON keys, header values), URLs, a
// line that cites another project's file (owner/repo/src/file.ts, a .js or
// .py file) and the line after it, a word after another project's
// possessive ("JavaScript's encodeURI"), regular expressions, all-capital
// words (HMAC) and single words (Source, run) unless written as doc links.
// So a name from another project's code is written in quotes or after its
// owner's possessive.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := "."
	switch len(args) {
	case 0:
	case 1:
		root = args[0]
	default:
		fmt.Fprintln(stderr, "usage: doccheck [DIR]")
		return 2
	}
	findings, err := checkTree(root)
	if err != nil {
		fmt.Fprintln(stderr, "doccheck:", err)
		return 2
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(stderr, "doccheck: %d comment(s) name something that does not exist\n", len(findings))
		return 1
	}
	return 0
}

// A finding is one name a comment gives that does not exist.
type finding struct {
	pos  token.Position
	name string
	why  string
}

func (f finding) String() string {
	return fmt.Sprintf("%s:%d: %q %s", f.pos.Filename, f.pos.Line, f.name, f.why)
}

// checkTree checks the module at root and every module nested under it.
func checkTree(root string) ([]finding, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	files, err := repoFiles(root)
	if err != nil {
		return nil, err
	}
	var mods []string
	for rel := range files.paths {
		if filepath.Base(rel) == "go.mod" && !underTestdata(rel) {
			mods = append(mods, filepath.Join(root, filepath.Dir(rel)))
		}
	}
	sort.Strings(mods)
	if len(mods) == 0 {
		return nil, fmt.Errorf("no go.mod under %s", root)
	}
	var all []finding
	for _, mod := range mods {
		fs, err := checkModule(mod, files)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mod, err)
		}
		all = append(all, fs...)
	}
	for i := range all {
		if rel, err := filepath.Rel(root, all[i].pos.Filename); err == nil {
			all[i].pos.Filename = filepath.ToSlash(rel)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i].pos, all[j].pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Line < b.Line
	})
	return all, nil
}

func underTestdata(rel string) bool {
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == "testdata" {
			return true
		}
	}
	return false
}

// tree is the set of files in the repository, for cited file names.
type tree struct {
	root  string
	paths map[string]bool // slash paths from root
	names map[string]bool // base names
}

func repoFiles(root string) (*tree, error) {
	t := &tree{root: root, paths: map[string]bool{}, names: map[string]bool{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		t.paths[rel] = true
		t.names[d.Name()] = true
		return nil
	})
	return t, err
}

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	ForTest    string
	Module     *struct {
		Path string
		Main bool
	}
}

// module is one module's packages and the declarations of everything they
// import, parsed on first use.
type module struct {
	fset    *token.FileSet
	byPath  map[string]*listed
	own     []*listed
	byName  map[string]string // a module package's name → its import path, when unique
	exports map[string]*decls // import path → its declarations
	files   *tree
	// words holds every identifier in the module's own files: a comment
	// may name what another package of the module declares or uses.
	words map[string]bool
	// imported holds the import paths of every file of the module.
	imported map[string]bool
}

func checkModule(dir string, files *tree) ([]finding, error) {
	cmd := exec.Command("go", "list", "-deps", "-test", "-json", "./...")
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	m := &module{fset: token.NewFileSet(), byPath: map[string]*listed{}, byName: map[string]string{},
		exports: map[string]*decls{}, files: files, words: map[string]bool{}, imported: map[string]bool{}}
	dec := json.NewDecoder(&out)
	names, std := map[string][]string{}, map[string][]string{}
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list: %w", err)
		}
		if p.ForTest != "" || strings.HasSuffix(p.ImportPath, ".test") {
			continue // test variants: their files are the package's own
		}
		pp := p
		m.byPath[p.ImportPath] = &pp
		switch {
		case p.Module != nil && p.Module.Main:
			m.own = append(m.own, &pp)
			names[p.Name] = append(names[p.Name], p.ImportPath)
		case p.Module == nil:
			std[p.Name] = append(std[p.Name], p.ImportPath)
		}
	}
	// pkg in pkg.Name is a package of the module, else of the standard
	// library, when the name is not ambiguous.
	for _, byName := range []map[string][]string{std, names} {
		for name, paths := range byName {
			if len(paths) == 1 {
				m.byName[name] = paths[0]
			} else {
				delete(m.byName, name)
			}
		}
	}
	sort.Slice(m.own, func(i, j int) bool { return m.own[i].ImportPath < m.own[j].ImportPath })
	scopes := make([]*pkgScope, 0, len(m.own))
	for _, p := range m.own {
		s, err := m.parsePackage(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.ImportPath, err)
		}
		scopes = append(scopes, s)
	}
	var all []finding
	for _, s := range scopes {
		for _, f := range s.files {
			all = append(all, s.checkFile(f)...)
		}
	}
	return all, nil
}

// decls are a package's declarations: its top-level names and, per type,
// its fields and methods.
type decls struct {
	top     map[string]bool
	members map[string]map[string]bool
	// embeds records types with an embedded field, whose members are
	// then not known exactly.
	embeds map[string]bool
	any    map[string]bool // every field and method of every type
}

func newDecls() *decls {
	return &decls{top: map[string]bool{}, members: map[string]map[string]bool{}, embeds: map[string]bool{}, any: map[string]bool{}}
}

func (d *decls) member(typ, name string) {
	if d.members[typ] == nil {
		d.members[typ] = map[string]bool{}
	}
	d.members[typ][name] = true
	d.any[name] = true
}

// hasMember says whether typ has the field or method name, as far as the
// parsed source can tell.
func (d *decls) hasMember(typ, name string) bool {
	if d.members[typ][name] {
		return true
	}
	return d.embeds[typ] && d.any[name]
}

func (d *decls) addFile(f *ast.File, exportedOnly bool) {
	keep := func(n string) bool { return !exportedOnly || ast.IsExported(n) }
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv != nil && len(decl.Recv.List) == 1 {
				if typ := recvName(decl.Recv.List[0].Type); typ != "" && keep(decl.Name.Name) {
					d.member(typ, decl.Name.Name)
				}
				continue
			}
			if keep(decl.Name.Name) {
				d.top[decl.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						if keep(n.Name) {
							d.top[n.Name] = true
						}
					}
				case *ast.TypeSpec:
					if keep(spec.Name.Name) {
						d.top[spec.Name.Name] = true
					}
					d.typeMembers(spec.Name.Name, spec.Type, keep)
				}
			}
		}
	}
}

func (d *decls) typeMembers(typ string, t ast.Expr, keep func(string) bool) {
	var fields *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			d.embeds[typ] = true
			if n := recvName(f.Type); n != "" && keep(n) {
				d.member(typ, n)
			}
			continue
		}
		for _, n := range f.Names {
			if keep(n.Name) {
				d.member(typ, n.Name)
			}
		}
	}
}

// recvName is the type name of a receiver or embedded field: T, *T, T[P],
// pkg.T.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// exportsOf parses an imported package's files for its exported names.
func (m *module) exportsOf(path string) *decls {
	if d, ok := m.exports[path]; ok {
		return d
	}
	d := newDecls()
	m.exports[path] = d
	p := m.byPath[path]
	if p == nil {
		return d
	}
	for _, name := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
		f, err := parser.ParseFile(m.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			continue // a file we cannot read adds no names; its package still builds with go
		}
		d.addFile(f, true)
	}
	return d
}

// pkgScope is what one package's comments are checked against.
type pkgScope struct {
	m     *module
	p     *listed
	files []*ast.File
	own   *decls          // the package's own declarations, unexported included
	words map[string]bool // every identifier and string-literal word in its files
}

var wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// parsePackage reads every .go file in a package's directory, for its
// names and its comments.
func (m *module) parsePackage(p *listed) (*pkgScope, error) {
	entries, err := os.ReadDir(p.Dir)
	if err != nil {
		return nil, err
	}
	s := &pkgScope{m: m, p: p, own: newDecls(), words: map[string]bool{}}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(m.fset, filepath.Join(p.Dir, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, f)
		s.own.addFile(f, false)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				s.words[n.Name] = true
				m.words[n.Name] = true
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					for _, w := range wordRE.FindAllString(n.Value, -1) {
						s.words[w] = true
					}
				}
			}
			return true
		})
		for _, imp := range f.Imports {
			if path, err := strconv.Unquote(imp.Path.Value); err == nil {
				m.imported[path] = true
			}
		}
	}
	return s, nil
}

// importNames maps the names a file's imports are used by to their paths.
func (s *pkgScope) importNames(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := pathBase(path)
		if p := s.m.byPath[path]; p != nil && p.Name != "" {
			name = p.Name
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name != "_" && name != "." {
			names[name] = path
		}
	}
	return names
}

func pathBase(path string) string {
	if i := strings.LastIndex(path, "/"); i >= 0 {
		return path[i+1:]
	}
	return path
}

// lookupPkg resolves the pkg of pkg.Name in a comment: an import of the
// file, then a package of the module or the standard library by its name.
func (s *pkgScope) lookupPkg(imports map[string]string, name string) (string, bool) {
	if path, ok := imports[name]; ok {
		return path, true
	}
	if path, ok := s.m.byName[name]; ok && path != s.p.ImportPath {
		return path, true
	}
	return "", false
}

// known says whether a bare identifier-like word names something: in the
// package's code and strings (a JSON key it reads), in the module's code,
// among the exported names of what the module imports, or in the
// allowlist.
func (s *pkgScope) known(w string) bool {
	return s.words[w] || s.m.known(w)
}

func (m *module) known(w string) bool {
	if m.words[w] || allowed[w] {
		return true
	}
	for path := range m.imported {
		d := m.exportsOf(path)
		if d.top[w] || d.any[w] {
			return true
		}
	}
	return false
}

// Identifier-shaped words: a lower-case run then a capital, or two or more
// capitalised words run together.
var (
	camelRE  = regexp.MustCompile(`^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$`)
	pascalRE = regexp.MustCompile(`^[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*$`)
	// A token of a comment: a run of characters that are not space, with
	// the punctuation around it trimmed later.
	tokenRE = regexp.MustCompile(`[^\s]+`)
	// Dotted names: pkg.Name, Type.Member, pkg.Type.Member.
	dottedRE = regexp.MustCompile(`^\*?&?([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?$`)
	fileRE   = regexp.MustCompile(`^[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(go|md|s|yaml|yml|sql)$`)
)

func (s *pkgScope) checkFile(f *ast.File) []finding {
	imports := s.importNames(f)
	var out []finding
	for _, cg := range f.Comments {
		out = append(out, s.checkComment(cg, imports)...)
	}
	return out
}

func (s *pkgScope) checkComment(cg *ast.CommentGroup, imports map[string]string) []finding {
	var out []finding
	seen := map[string]bool{}
	report := func(pos token.Pos, name, why string) {
		key := strings.Trim(name, "[]")
		if seen[key] {
			return
		}
		seen[key] = true
		out = append(out, finding{pos: s.m.fset.Position(pos), name: name, why: why})
	}
	// linkPos finds the line of a doc link's text, which the parsed
	// comment no longer knows.
	linkPos := func(l *comment.DocLink) token.Pos {
		name := l.Name
		if l.Recv != "" {
			name = l.Recv + "." + name
		}
		for _, c := range cg.List {
			if i := strings.Index(c.Text, name+"]"); i >= 0 {
				return c.Slash + token.Pos(i)
			}
		}
		return cg.Pos()
	}
	// Doc links, found as go doc finds them.
	var links []*comment.DocLink
	p := comment.Parser{
		LookupPackage: func(name string) (string, bool) { return s.lookupPkg(imports, name) },
		LookupSym:     func(recv, name string) bool { return true },
	}
	doc := p.Parse(quoted.ReplaceAllStringFunc(cg.Text(), blank))
	walkLinks(doc, func(l *comment.DocLink) { links = append(links, l) })
	for _, l := range links {
		if len(l.Name) <= 2 && l.Recv == "" && l.ImportPath == "" {
			continue // an index or a character class, not a link
		}
		if why := s.checkLink(l); why != "" {
			report(linkPos(l), linkText(l), why)
		}
	}
	// Words, line by line so that findings carry their line. A line that
	// cites another project's code (a path that is not this repository's,
	// a .js or .py file) is about that code, and so is the line after it.
	cited := false
	for _, c := range cg.List {
		text := quoted.ReplaceAllStringFunc(c.Text, blank)
		toks := tokenRE.FindAllStringIndex(text, -1)
		citing := false
		for _, loc := range toks {
			if s.citesOtherCode(text[loc[0]:loc[1]]) {
				citing = true
			}
		}
		if citing || cited {
			cited = citing
			continue
		}
		var prev string
		for _, loc := range toks {
			tok := text[loc[0]:loc[1]]
			pos := c.Slash + token.Pos(loc[0])
			owner := possessor(prev)
			prev = tok
			if strings.Contains(tok, "://") || strings.HasPrefix(tok, "www.") {
				continue
			}
			if owner != "" && !s.m.words[owner] {
				continue // a name in someone else's code
			}
			if regexLike.MatchString(tok) {
				continue // a pattern, whose character classes are no names
			}
			for _, w := range splitToken(tok) {
				if why := s.checkWord(w, imports); why != "" {
					report(pos, w, why)
				}
			}
		}
	}
	return out
}

// quoted spans of a comment are data (a JSON key, a header value, a
// format), not names of code.
var quoted = regexp.MustCompile("\"[^\"]*\"|`[^`]*`")

func blank(q string) string { return strings.Repeat(" ", len(q)) }

// possessor returns X of a token "X's" (or "Xs'"), else "".
func possessor(tok string) string {
	for _, suf := range []string{"'s", "’s", "s'"} {
		if strings.HasSuffix(tok, suf) {
			return strings.TrimSuffix(strings.TrimSuffix(tok, suf), "s'")
		}
	}
	return ""
}

// citesOtherCode says whether a token names a file of another project: a
// path that is not in this repository, or a source file in another
// language.
func (s *pkgScope) citesOtherCode(tok string) bool {
	tok = strings.Trim(tok, "()[],.;:'\"")
	if tok == "" || strings.Contains(tok, "://") {
		return false
	}
	switch filepath.Ext(tok) {
	case ".js", ".ts", ".mjs", ".py", ".rb", ".java", ".php", ".cs", ".kt", ".swift":
		return true
	}
	if !pathLike.MatchString(tok) {
		return false
	}
	return !s.fileExists(tok) && !s.m.files.paths[strings.TrimSuffix(tok, "/")]
}

// regexLike: a token that holds a regular expression's syntax.
var regexLike = regexp.MustCompile(`\\|\[\^|-[0-9a-zA-Z]\]|\)[?*+]|\][?*+]`)

// pathLike: two or more slash-separated names, as in owner/repo or
// src/file.go.
var pathLike = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+/?$`)

// splitToken cuts a comment token into the words to check: punctuation
// around it trimmed, a possessive dropped, brackets and quotes as breaks.
// A token holding a path (a slash) yields only a cited file name, if any.
func splitToken(tok string) []string {
	var out []string
	for _, part := range strings.FieldsFunc(tok, func(r rune) bool {
		return strings.ContainsRune("[](){}<>\"'`,;=:!?|", r)
	}) {
		part = strings.TrimSuffix(part, "’s")
		part = strings.Trim(part, ".*&-+%#@$^~")
		if part == "" {
			continue
		}
		if strings.Contains(part, "/") && !fileRE.MatchString(part) {
			continue // a path, a URL or an import path: not ours to read
		}
		out = append(out, part)
	}
	return out
}

// checkWord returns why w names nothing, or "".
func (s *pkgScope) checkWord(w string, imports map[string]string) string {
	if fileRE.MatchString(w) {
		if !s.fileExists(w) {
			return "is cited as a file, but there is no such file in the repository"
		}
		return ""
	}
	if m := dottedRE.FindStringSubmatch(w); m != nil {
		return s.checkDotted(m[1], strings.Split(m[2][1:], "."), imports)
	}
	if !camelRE.MatchString(w) && !pascalRE.MatchString(w) {
		return ""
	}
	if s.known(w) {
		return ""
	}
	return "looks like a Go identifier, but nothing in the module or its imports has that name"
}

func (s *pkgScope) checkDotted(first string, rest []string, imports map[string]string) string {
	path, ok := s.lookupPkg(imports, first)
	if !ok {
		if !s.m.words[first] {
			return "" // x.Y of something the module never names: not ours to check
		}
		// Type.Member or value.Field: the names must exist somewhere when
		// they look like identifiers.
		for _, n := range rest {
			if (camelRE.MatchString(n) || pascalRE.MatchString(n)) && !s.known(n) {
				return "looks like a Go identifier, but nothing in the module or its imports has that name"
			}
		}
		return ""
	}
	if !ast.IsExported(rest[0]) {
		return "" // pkg.lower is prose (a file name, a key) more often than a reference
	}
	d := s.m.exportsOf(path)
	if !d.top[rest[0]] {
		if len(rest) == 1 && d.any[rest[0]] {
			return "" // ledger.Once: the method of the package's main type
		}
		if len(rest) == 1 && d.top[strings.TrimSuffix(rest[0], "s")] {
			return "" // two http.Servers: a plural
		}
		return fmt.Sprintf("names %s.%s, which package %s does not declare", first, rest[0], path)
	}
	if len(rest) > 1 && ast.IsExported(rest[1]) && !d.hasMember(rest[0], rest[1]) {
		return fmt.Sprintf("names %s.%s.%s, but %s.%s has no field or method %s", first, rest[0], rest[1], first, rest[0], rest[1])
	}
	return ""
}

func (s *pkgScope) checkLink(l *comment.DocLink) string {
	if l.ImportPath == "" {
		if l.Recv == "" {
			if s.words[l.Name] || predeclared[l.Name] {
				return ""
			}
			return "is a doc link to nothing in the package"
		}
		if !s.own.top[l.Recv] && !s.words[l.Recv] {
			return "is a doc link to a type the package does not have"
		}
		if !s.own.hasMember(l.Recv, l.Name) && !s.words[l.Name] {
			return "is a doc link to a field or method the type does not have"
		}
		return ""
	}
	d := s.m.exportsOf(l.ImportPath)
	if l.Name == "" {
		return ""
	}
	if l.Recv == "" {
		if !d.top[l.Name] {
			return fmt.Sprintf("is a doc link, but package %s does not declare %s", l.ImportPath, l.Name)
		}
		return ""
	}
	if !d.top[l.Recv] || !d.hasMember(l.Recv, l.Name) {
		return fmt.Sprintf("is a doc link, but package %s has no %s.%s", l.ImportPath, l.Recv, l.Name)
	}
	return ""
}

func linkText(l *comment.DocLink) string {
	var b strings.Builder
	b.WriteString("[")
	if l.ImportPath != "" {
		b.WriteString(pathBase(l.ImportPath) + ".")
	}
	if l.Recv != "" {
		b.WriteString(l.Recv + ".")
	}
	b.WriteString(l.Name + "]")
	return b.String()
}

func walkLinks(doc *comment.Doc, fn func(*comment.DocLink)) {
	var texts func([]comment.Text)
	texts = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				fn(t)
			case *comment.Link:
				texts(t.Text)
			case *comment.Italic, comment.Plain:
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				texts(b.Text)
			case *comment.Heading:
				texts(b.Text)
			case *comment.List:
				for _, item := range b.Items {
					blocks(item.Content)
				}
			}
		}
	}
	blocks(doc.Content)
}

// fileExists looks for a cited file next to the package, at that path from
// the repository root, or by its name anywhere in the repository.
func (s *pkgScope) fileExists(name string) bool {
	name = filepath.ToSlash(name)
	if _, err := os.Stat(filepath.Join(s.p.Dir, name)); err == nil {
		return true
	}
	if s.m.files.paths[strings.TrimPrefix(name, "./")] {
		return true
	}
	if !strings.Contains(name, "/") {
		return s.m.files.names[name]
	}
	// a path relative to some directory: its tail must exist somewhere
	for p := range s.m.files.paths {
		if strings.HasSuffix(p, "/"+name) {
			return true
		}
	}
	return false
}

// predeclared identifiers may be doc-linked ([error], [any]).
var predeclared = map[string]bool{
	"any": true, "bool": true, "byte": true, "comparable": true, "complex64": true, "complex128": true,
	"error": true, "float32": true, "float64": true, "int": true, "int8": true, "int16": true, "int32": true,
	"int64": true, "rune": true, "string": true, "uint": true, "uint8": true, "uint16": true, "uint32": true,
	"uint64": true, "uintptr": true, "true": true, "false": true, "iota": true, "nil": true,
	"append": true, "cap": true, "clear": true, "close": true, "complex": true, "copy": true, "delete": true,
	"imag": true, "len": true, "make": true, "max": true, "min": true, "new": true, "panic": true,
	"print": true, "println": true, "real": true, "recover": true,
}

// allowed are words shaped like identifiers that are names of products,
// companies and formats, not of code.
var allowed = map[string]bool{
	"AfterShip": true, "CloudEvents": true, "DevTools": true, "GitHub": true, "GitLab": true,
	"GovCloud": true, "HashiCorp": true, "HubSpot": true, "JavaScript": true, "LinkedIn": true,
	"MongoDB": true, "OfficeDev": true, "OpenAI": true, "OpenAPI": true, "OpenTelemetry": true, "PagerDuty": true,
	"PostgreSQL": true, "SendGrid": true, "TwiML": true, "TypeScript": true, "W3C": true,
	"WebAssembly": true, "WooCommerce": true, "gRPC": true, "macOS": true,
	// units and formats
	"KiB": true, "MiB": true, "GiB": true, "SubjectPublicKeyInfo": true,
	// words about code
	"camelCase": true, "PascalCase": true,
}
