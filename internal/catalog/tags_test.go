package catalog

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolagent/toolagent/internal/hldp"
)

func TestParseTagFilter(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		want    []string
		wantErr bool
	}{
		{"none", nil, nil, false},
		{"one", []string{"git"}, []string{"git"}, false},
		{"repeated", []string{"git", "read-only"}, []string{"git", "read-only"}, false},
		{"comma list", []string{"git,read-only"}, []string{"git", "read-only"}, false},
		{"both, duplicates once", []string{"git, read-only", "git"}, []string{"git", "read-only"}, false},
		{"empty items", []string{"", ",git,"}, []string{"git"}, false},
		{"uppercase", []string{"Git"}, nil, true},
		{"underscore", []string{"git,read_only"}, nil, true},
	}
	for _, tc := range tests {
		got, err := ParseTagFilter(tc.values)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: ParseTagFilter(%q) error = %v; want error %v", tc.name, tc.values, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ParseTagFilter(%q) (-want +got):\n%s", tc.name, tc.values, diff)
		}
	}
}

func TestFilterTags(t *testing.T) {
	entries := []Entry{
		{Name: "a", Tool: &hldp.Tool{Name: "a", Ext: &hldp.Ext{Tags: []string{"git", "read-only"}}}},
		{Name: "b", Tool: &hldp.Tool{Name: "b", Ext: &hldp.Ext{Tags: []string{"git"}}}},
		{Name: "c", Tool: &hldp.Tool{Name: "c"}},
		{Name: "broken"}, // no definition: no tags
	}
	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return out
	}
	tests := []struct {
		tags []string
		want []string
	}{
		{nil, []string{"a", "b", "c", "broken"}},
		{[]string{"git"}, []string{"a", "b"}},
		{[]string{"git", "read-only"}, []string{"a"}},
		{[]string{"deploy"}, nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, names(FilterTags(entries, tc.tags))); diff != "" {
			t.Errorf("FilterTags(%q) (-want +got):\n%s", tc.tags, diff)
		}
	}
}
