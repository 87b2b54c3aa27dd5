package httpapi

import _ "embed"

// openAPI is the OpenAPI 3.1 document of the routes, served at
// /openapi.json. TestOpenAPI checks that it and the routes table name the
// same paths and methods.
//
//go:embed openapi.json
var openAPI []byte
