package sealing

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// keySize is AES-256's.
const keySize = 32

// idPattern is what a key id may be: it is stored with each value.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ErrUnknownKey: the value was sealed under a key the file no longer holds.
var ErrUnknownKey = errors.New("sealed under a key the key file does not hold")

type key struct {
	id   string
	aead cipher.AEAD
}

// Ring is the keys of one key file, read again whenever the file changes
// (its size or modification time). It is safe for concurrent use.
type Ring struct {
	path string

	mu      sync.Mutex
	keys    []key // oldest first
	size    int64
	modTime time.Time
}

// Load reads the key file at path. It must hold at least one key and be
// readable by its owner only (0600 or 0400).
func Load(path string) (*Ring, error) {
	r := &Ring{path: path}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// current reads the file again when it changed since the last read. A file
// that became unreadable or invalid keeps the keys read before: a bad edit
// must not stop the service from opening what it holds.
func (r *Ring) current() ([]key, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, err := os.Stat(r.path); err == nil && (st.Size() != r.size || !st.ModTime().Equal(r.modTime)) {
		if err := r.reloadLocked(); err != nil && len(r.keys) == 0 {
			return nil, err
		}
	}
	if len(r.keys) == 0 {
		return nil, fmt.Errorf("key file %s holds no key", r.path)
	}
	return r.keys, nil
}

func (r *Ring) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked()
}

func (r *Ring) reloadLocked() error {
	st, err := os.Stat(r.path)
	if err != nil {
		return fmt.Errorf("credentials key file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("credentials key file %s: mode %04o lets others read it; chmod 600", r.path, st.Mode().Perm())
	}
	b, err := os.ReadFile(r.path)
	if err != nil {
		return fmt.Errorf("credentials key file: %w", err)
	}
	keys, err := parse(b)
	if err != nil {
		return fmt.Errorf("credentials key file %s: %w", r.path, err)
	}
	r.keys, r.size, r.modTime = keys, st.Size(), st.ModTime()
	return nil
}

// parse reads "ID BASE64" lines; blank lines and # comments are skipped.
func parse(b []byte) ([]key, error) {
	var keys []key
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, ok := strings.Cut(line, " ")
		if !ok || !idPattern.MatchString(id) {
			return nil, fmt.Errorf("line %d: want ID BASE64 with an id of [A-Za-z0-9._-]", n)
		}
		if seen[id] {
			return nil, fmt.Errorf("line %d: key id %q used twice", n, id)
		}
		seen[id] = true
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
		if err != nil || len(raw) != keySize {
			return nil, fmt.Errorf("line %d: key %q is not %d bytes of base64", n, id, keySize)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		keys = append(keys, key{id: id, aead: aead})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("holds no key")
	}
	return keys, nil
}

// Newest is the id of the key values are sealed under now.
func (r *Ring) Newest() (string, error) {
	keys, err := r.current()
	if err != nil {
		return "", err
	}
	return keys[len(keys)-1].id, nil
}

// Seal encrypts plain under the newest key with additional data ad.
func (r *Ring) Seal(plain, ad []byte) (keyID string, nonce, sealed []byte, err error) {
	keys, err := r.current()
	if err != nil {
		return "", nil, nil, err
	}
	k := keys[len(keys)-1]
	nonce = make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, nil, err
	}
	return k.id, nonce, k.aead.Seal(nil, nonce, plain, ad), nil
}

// Open decrypts what Seal returned; ErrUnknownKey when keyID is not in the
// file any more.
func (r *Ring) Open(keyID string, nonce, sealed, ad []byte) ([]byte, error) {
	keys, err := r.current()
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.id != keyID {
			continue
		}
		if len(nonce) != k.aead.NonceSize() {
			return nil, errors.New("open a sealed value: bad nonce")
		}
		plain, err := k.aead.Open(nil, nonce, sealed, ad)
		if err != nil {
			return nil, fmt.Errorf("open a sealed value under key %q: %w", keyID, err)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("key %q: %w", keyID, ErrUnknownKey)
}
