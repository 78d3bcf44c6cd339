// Command credsearch is the hostile suite's pod that hunts for the
// agent's credentials: it reads every regular file it can in its whole
// file-system view (/ down, symlinks not followed; /sys and /dev left out,
// /proc read for every other process's environment and command line and
// tried through each process's root), plus each path given with -path, and
// prints one line per secret it finds (FOUND name path) and per path it
// opened (OPENED path bytes), then a summary (SEARCHED visited files bytes
// pids). Secrets come hex-encoded (-secret name=HEX), so that its own
// command line does not hold them. With -since it reads only the files
// changed since then: secrets made after it cannot be in older files, and
// the whole disk is not read on every run.
package main

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxRead bounds what is read of one file: keys, tokens and env files are
// small, and a page cache of the whole disk is not the point.
const maxRead = 4 << 20

type secret struct {
	name string
	b    []byte
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var secretArgs, paths list
	flag.Var(&secretArgs, "secret", "name=HEX of a secret to look for (repeated)")
	flag.Var(&paths, "path", "a path to try directly and through every process's root (repeated)")
	root := flag.String("root", "/", "where the walk starts")
	since := flag.Int64("since", 0, "read only files modified at or after this Unix time (seconds)")
	flag.Parse()
	var secrets []secret
	for _, a := range secretArgs {
		name, h, _ := strings.Cut(a, "=")
		b, err := hex.DecodeString(h)
		if err != nil || len(b) < 8 {
			fmt.Println("BADSECRET", name)
			os.Exit(2)
		}
		secrets = append(secrets, secret{name, b})
	}
	s := &search{secrets: secrets}
	_ = filepath.WalkDir(*root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skipped, which is the point
		}
		if d.IsDir() && (p == "/proc" || p == "/sys" || p == "/dev") {
			return filepath.SkipDir
		}
		s.visited++
		if !d.Type().IsRegular() {
			return nil
		}
		if *since > 0 {
			if info, err := d.Info(); err != nil || info.ModTime().Unix() < *since {
				return nil
			}
		}
		s.file(p)
		return nil
	})
	self := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	pids := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
			continue
		}
		pids++
		for _, f := range []string{"environ", "cmdline"} {
			s.file(filepath.Join("/proc", e.Name(), f))
		}
		for _, p := range paths {
			s.opened(filepath.Join("/proc", e.Name(), "root", p))
		}
	}
	for _, p := range paths {
		s.opened(p)
	}
	fmt.Println("SEARCHED", s.visited, s.files, s.bytes, pids)
}

type search struct {
	secrets []secret
	visited int
	files   int
	bytes   int64
}

// file reads p (up to maxRead) and reports each secret in it.
func (s *search) file(p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRead))
	if err != nil && len(b) == 0 {
		return nil
	}
	s.files++
	s.bytes += int64(len(b))
	for _, sec := range s.secrets {
		if bytes.Contains(b, sec.b) {
			fmt.Println("FOUND", sec.name, p)
		}
	}
	return b
}

// opened tries p directly: a hidden or unreadable path opens to nothing.
func (s *search) opened(p string) {
	if b := s.file(p); len(b) > 0 {
		fmt.Println("OPENED", p, len(b))
	}
}
