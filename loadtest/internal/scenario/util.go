package scenario

import (
	"encoding/json"
	"io"
	"net/http"
)

func decodeBody(resp *http.Response, v any) error {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

type ioWriter = io.Writer
