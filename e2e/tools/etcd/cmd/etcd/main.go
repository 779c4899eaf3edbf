// Command etcd is upstream etcd's server entry point, built from the published
// go.etcd.io/etcd/server/v3 module: the etcd root module replaces its siblings
// with relative paths, so it cannot be built from the module proxy directly.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
