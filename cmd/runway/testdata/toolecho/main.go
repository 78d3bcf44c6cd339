// Command toolecho is the tool proxy tests' pod: an HTTP server on the port
// given that answers every request with what it received (method, path,
// headers) as JSON, and echoes each WebSocket message at /ws. The tests
// build it statically and put it in a busybox image.
//
// `toolecho probe ADDR...` is a hostile pod instead: it prints "OPEN ADDR"
// for each host:port it can open a TCP connection to (the host "gateway"
// is its default route's), then "probed".
package main

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		probe(os.Args[2:])
		return
	}
	if len(os.Args) != 2 {
		log.Fatal("usage: toolecho PORT")
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	http.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil || c.WriteMessage(typ, msg) != nil {
				return
			}
		}
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// A pod that tries to set its users' proxy session.
		http.SetCookie(w, &http.Cookie{Name: "runway_tool_session", Value: "from-the-pod", Path: "/"})
		http.SetCookie(w, &http.Cookie{Name: "echo", Value: "kept", Path: "/"})
		_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
			"host": r.Host, "header": r.Header})
	})
	log.Fatal(http.ListenAndServe(":"+os.Args[1], nil))
}

func probe(addrs []string) {
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		if host == "gateway" {
			host = gateway()
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second)
		if err == nil {
			fmt.Println("OPEN", a, host)
			_ = c.Close()
		} else {
			fmt.Println("closed", a, host, err)
		}
	}
	fmt.Println("probed")
}

// gateway is the default route's gateway, from /proc/net/route.
func gateway() string {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" {
			g, err := hex.DecodeString(f[2])
			if err == nil && len(g) == 4 {
				ip := make(net.IP, 4)
				binary.LittleEndian.PutUint32(ip, binary.BigEndian.Uint32(g))
				return ip.String()
			}
		}
	}
	return ""
}
