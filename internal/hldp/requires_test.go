package hldp

import "testing"

func TestValidTag(t *testing.T) {
	tests := []struct {
		tag  string
		want bool
	}{
		{"git", true},
		{"read-only", true},
		{"k8s", true},
		{"2fa", true},
		{"", false},
		{"Git", false},
		{"read_only", false},
		{"read only", false},
		{"-git", false},
		{"git-", false},
		{"read--only", false},
		{"部署", false},
		{"a234567890123456789012345678901234567890", true},
		{"a2345678901234567890123456789012345678901", false},
	}
	for _, tc := range tests {
		if got := ValidTag(tc.tag); got != tc.want {
			t.Errorf("ValidTag(%q) = %v; want %v", tc.tag, got, tc.want)
		}
	}
}

func TestHasTags(t *testing.T) {
	tool := &Tool{Ext: &Ext{Tags: []string{"git", "read-only"}}}
	tests := []struct {
		tags []string
		want bool
	}{
		{nil, true},
		{[]string{"git"}, true},
		{[]string{"read-only", "git"}, true},
		{[]string{"git", "deploy"}, false},
	}
	for _, tc := range tests {
		if got := tool.HasTags(tc.tags...); got != tc.want {
			t.Errorf("HasTags(%q) = %v; want %v", tc.tags, got, tc.want)
		}
	}
}
