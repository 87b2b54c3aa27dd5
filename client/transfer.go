package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/chatmem/chatmem/transfer"
)

// ndjsonType is the media type of exports and of import answers.
const ndjsonType = "application/x-ndjson"

// ExportConversation writes the conversation's chatmem/v1 export (header
// included) to w, as the server streams it.
func (c *Client) ExportConversation(ctx context.Context, id string, w io.Writer) error {
	return c.streamTo(ctx, http.MethodGet, convPath(id, "export"), nil, nil, w)
}

// Export writes one page of the tenant's conversations as chatmem/v1 (header
// included) to w and returns the after= of the next page ("" on the last).
// limit 0 is the server's default of 50.
func (c *Client) Export(ctx context.Context, after string, limit int, w io.Writer) (string, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var next string
	err := c.streamTo(ctx, http.MethodGet, "/v1/export", q, func(h http.Header) { next = h.Get("X-Chatmem-Next") }, w)
	return next, err
}

// Import sends a chatmem/v1 stream from r to the caller's tenant, with the
// conflict policy onConflict ("" is skip), and returns the result of each
// conversation and the totals. An error the server met after it started
// answering is returned with the results before it.
func (c *Client) Import(ctx context.Context, r io.Reader, onConflict transfer.Conflict) ([]transfer.Result, transfer.Totals, error) {
	q := url.Values{}
	if onConflict != "" {
		q.Set("on_conflict", string(onConflict))
	}
	var results []transfer.Result
	var totals transfer.Totals
	resp, err := c.send(ctx, http.MethodPost, "/v1/import", q, http.Header{"Content-Type": {ndjsonType}, "Accept": {ndjsonType}}, r)
	if err != nil {
		return nil, totals, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// A line is a result, the totals, or an error ({"error":{...}},
		// where a result's error is a string).
		var line struct {
			Totals *transfer.Totals `json:"totals"`
			Error  json.RawMessage  `json:"error"`
		}
		var res transfer.Result
		err := json.Unmarshal(sc.Bytes(), &line)
		if err == nil && len(line.Error) > 0 && line.Error[0] == '{' {
			var e ErrorDetail
			if err = json.Unmarshal(line.Error, &e); err == nil {
				return results, totals, &Error{Status: resp.StatusCode, Code: e.Code, Message: e.Message, RequestID: resp.Header.Get("X-Request-Id")}
			}
		}
		if err == nil && line.Totals != nil {
			return results, *line.Totals, nil
		}
		if err == nil {
			err = json.Unmarshal(sc.Bytes(), &res)
		}
		if err != nil {
			return results, totals, fmt.Errorf("chatmem api: POST /v1/import: decode answer: %w", err)
		}
		results = append(results, res)
	}
	if err := sc.Err(); err != nil {
		return results, totals, fmt.Errorf("chatmem api: POST /v1/import: %w", err)
	}
	return results, totals, fmt.Errorf("chatmem api: POST /v1/import: the answer ended before its totals")
}

// streamTo sends a request without a body and copies a successful answer's
// body to w, calling head (if set) with its headers first.
func (c *Client) streamTo(ctx context.Context, method, path string, q url.Values, head func(http.Header), w io.Writer) error {
	resp, err := c.send(ctx, method, path, q, http.Header{"Accept": {ndjsonType}}, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if head != nil {
		head(resp.Header)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("chatmem api: %s %s: %w", method, path, err)
	}
	return nil
}
