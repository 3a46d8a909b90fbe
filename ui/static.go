package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"mime"
	"net/http"
	"path"
)

//go:embed static/ui.js static/ui.css
var staticFiles embed.FS

// assets are the static files' addresses, each under its content's hash so a browser may keep
// it for good: a new version is a new address.
type assets struct{ Script, Style string }

var staticAssets, staticHashes = hashAssets()

func hashAssets() (assets, map[string]string) {
	hashes := map[string]string{}
	url := func(file string) string {
		data, err := staticFiles.ReadFile("static/" + file)
		if err != nil {
			panic(err) // embedded: cannot be missing
		}
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:8])
		hashes[file] = h
		return "/static/" + h + "/" + file
	}
	return assets{Script: url("ui.js"), Style: url("ui.css")}, hashes
}

func serveStatic(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	if staticHashes[file] != r.PathValue("hash") {
		http.NotFound(w, r)
		return
	}
	data, err := staticFiles.ReadFile("static/" + file)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(file)))
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(data)
}
