package docgen

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutPaths returns the paths the README's layout table names in its
// first column, without a trailing slash.
func layoutPaths(t *testing.T, readme string) map[string]bool {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := regexp.MustCompile("`([^`]+)`")
	paths := map[string]bool{}
	inLayout := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inLayout = line == "## Layout"
		case inLayout && strings.HasPrefix(line, "| "):
			first := strings.SplitN(line, "|", 3)[1]
			for _, m := range code.FindAllStringSubmatch(first, -1) {
				paths[strings.TrimSuffix(m[1], "/")] = true
			}
		}
	}
	return paths
}

// goDirs returns the directories under dir (relative to root) that hold a
// Go file, testdata and hidden directories left out.
func goDirs(t *testing.T, root, dir string) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			dirs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// A newcomer reads the README's layout table to find their way: every
// top-level directory of Go code must be in it, and where the table lists a
// directory's parts rather than the directory (test/cluster, ...) every part
// that holds Go code; every path it names must exist.
func TestREADMELayoutNamesEveryGoDirectory(t *testing.T) {
	root := "../.."
	table := layoutPaths(t, filepath.Join(root, "README.md"))
	if len(table) == 0 {
		t.Fatal("README.md has no layout table (## Layout)")
	}
	for p := range table {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the layout table names %s, which does not exist", p)
		}
	}
	for dir := range goDirs(t, root, ".") {
		top, _, _ := strings.Cut(dir, "/")
		if dir == "." || table[top] {
			continue
		}
		listed := false
		for p := range table {
			if dir == p || strings.HasPrefix(dir, p+"/") {
				listed = true
			}
		}
		if !listed {
			t.Errorf("%s holds Go code but the README's layout table names neither it nor %s/", dir, top)
		}
	}
}
