package httpapi

import (
	"net/http"

	"github.com/chatmem/chatmem/client"
)

// The Go client moved to package client, which links no server code; the
// names below keep programs written against this package compiling.

// Client calls a chatmem server's REST API.
//
// Deprecated: use client.Client.
type Client = client.Client

// NewClient returns a Client for the server at baseURL.
//
// Deprecated: use client.New.
func NewClient(baseURL, apiKey string, httpClient *http.Client) *Client {
	return client.New(baseURL, apiKey, httpClient)
}

// ClientAppendOptions qualify one Client.Append.
//
// Deprecated: use client.AppendOptions.
type ClientAppendOptions = client.AppendOptions

// ContextParams select the context a Client assembles.
//
// Deprecated: use client.ContextParams.
type ContextParams = client.ContextParams

// The bodies of the API's requests and answers, which the server encodes
// and the Go client decodes, are package client's.
type (
	Conversation       = client.Conversation
	AppendRequest      = client.AppendRequest
	AppendResponse     = client.AppendResponse
	TurnResponse       = client.TurnResponse
	MessagesPage       = client.MessagesPage
	ReceiptsPage       = client.ReceiptsPage
	ConversationPage   = client.ConversationPage
	FactInput          = client.FactInput
	FactsBody          = client.FactsBody
	SearchRequest      = client.SearchRequest
	RewindRequest      = client.RewindRequest
	RedactRequest      = client.RedactRequest
	RedactResponse     = client.RedactResponse
	SearchHit          = client.SearchHit
	SearchResponse     = client.SearchResponse
	UserList           = client.UserList
	DeleteUserResponse = client.DeleteUserResponse
	UserExportLine     = client.UserExportLine

	factsResponse = client.FactsResponse
)
