// Package nativerepo embeds the checkout's own tools tree
// (native-repo/tools), the catalog toolagent serves when it is given no
// other source and runs outside a checkout.
package nativerepo

import "embed"

// Tools holds tools/<name>/TOOL.hdlp of the five seed tools.
//
//go:embed tools
var Tools embed.FS
