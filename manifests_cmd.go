package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// manifestsCommand prints, without a cluster, which manifests of a directory
// each feature set includes and why: the seed's `grep -r feature-gate`
// investigation as one command. It exits 1 when a manifest cannot be read.
func manifestsCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("manifests", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("manifests-dir", "", "Directory of release manifests (required).")
	featureSet := fs.String("feature-set", "", "Only this feature set (default: every known one).")
	profile := fs.String("cluster-profile", "", "Cluster profile (include.release.openshift.io/<profile>).")
	output := fs.String("o", "table", "Output format: table or json.")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: manager manifests --manifests-dir DIR [--feature-set X] [--cluster-profile P] [-o table|json]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "manifests: --manifests-dir is required")
		return 2
	}
	var sets []string
	if *featureSet != "" {
		sets = strings.Split(*featureSet, ",")
	}
	ms, loadErrs := manifest.Load(*dir)
	if err := manifest.WriteReport(stdout, ms, loadErrs, sets, *profile, *output); err != nil {
		fmt.Fprintln(stderr, "manifests:", err)
		return 2
	}
	if len(loadErrs) > 0 {
		return 1
	}
	return 0
}
