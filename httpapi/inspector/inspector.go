// Package inspector holds the web inspector's files: one page (index.html)
// with its script and style sheet, plain HTML, CSS and JavaScript with no
// build step. httpapi serves them at / and /inspector/{file}; the page
// itself talks to the server only through the public REST API.
package inspector

import "embed"

// Files are the inspector's files, at the root of the file system.
//
//go:embed index.html app.js style.css
var Files embed.FS
