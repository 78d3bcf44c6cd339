// Command toolecho is the tool proxy tests' pod: an HTTP server on the port
// given that answers every request with what it received (method, path,
// headers) as JSON, and echoes each WebSocket message at /ws. The tests
// build it statically and put it in a busybox image.
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"

	"github.com/gorilla/websocket"
)

func main() {
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
