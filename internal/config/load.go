// Package config loads the operator's OperatorConfig file and merges it with
// command-line flags.
//
// The precedence is: built-in defaults < the --config file < flags given
// explicitly on the command line. A typical main.go:
//
//	fs := flag.CommandLine
//	flags := config.BindFlags(fs) // --config and every OperatorConfig flag
//	zapOpts.BindFlags(fs)
//	flag.Parse()
//	cfg, err := flags.Complete() // file (strict) + defaults + explicit flags, validated
//	if err != nil {
//		setupLog.Error(err, "invalid configuration")
//		os.Exit(1)
//	}
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/api/v1alpha1"
	"github.com/featuregate-operator/operator/pkg/limitedread"
)

// Load reads the OperatorConfig file at path, decodes it strictly (see
// Decode), fills in defaults and validates the result. Every error names the
// file, and the offending field where there is one.
func Load(path string) (*v1alpha1.OperatorConfig, error) {
	cfg, err := decodeFile(path)
	if err != nil {
		return nil, err
	}
	cfg.Default()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid config file %q: %w", path, errs.ToAggregate())
	}
	return cfg, nil
}

// MaxFileSize bounds the config file: a configuration is a few hundred
// bytes, and --config /dev/zero must not read until memory runs out.
const MaxFileSize = 1 << 20

func decodeFile(path string) (*v1alpha1.OperatorConfig, error) {
	data, err := limitedread.File(path, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	cfg, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("config file %q: %w", path, err)
	}
	return cfg, nil
}

// Decode strictly decodes one OperatorConfig from YAML (or JSON) data,
// without defaulting or validating it. It fails, naming what is wrong, on:
//   - anything but exactly one YAML document holding a mapping;
//   - a duplicate key;
//   - an apiVersion other than operator.featuregate-operator.io/v1alpha1 or a
//     kind other than OperatorConfig (both are required);
//   - an unknown field (keys are case-sensitive), e.g. `unknown field
//     "leaderElection.leaderElection"`;
//   - a duration field that is not a Go duration string, e.g.
//     `resyncPeriod: Invalid value: "3 minutes": ...`;
//   - a value of the wrong type for its field.
func Decode(data []byte) (*v1alpha1.OperatorConfig, error) {
	doc, err := singleDocument(data)
	if err != nil {
		return nil, err
	}
	jsonData, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}

	var raw map[string]interface{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(jsonData, &raw); err != nil {
		return nil, errors.New("must be a YAML mapping holding an OperatorConfig")
	}
	if raw == nil {
		return nil, errors.New("is empty: expected an OperatorConfig")
	}

	if err := checkTypeMeta(raw); err != nil {
		return nil, err
	}
	if errs := checkDurations(raw, reflect.TypeFor[v1alpha1.OperatorConfig](), nil); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}

	cfg := &v1alpha1.OperatorConfig{}
	strictErrs, err := kjson.UnmarshalStrict(jsonData, cfg)
	if err != nil {
		return nil, err
	}
	if len(strictErrs) > 0 {
		return nil, utilerrors.NewAggregate(strictErrs)
	}
	return cfg, nil
}

// singleDocument returns the one non-empty YAML document of data.
func singleDocument(data []byte) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var found []byte
	n := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue // empty or comments only
		}
		n++
		found = doc
	}
	switch n {
	case 0:
		return nil, errors.New("is empty: expected an OperatorConfig")
	case 1:
		return found, nil
	default:
		return nil, fmt.Errorf("holds %d YAML documents: expected exactly one OperatorConfig", n)
	}
}

func checkTypeMeta(raw map[string]interface{}) error {
	want := v1alpha1.GroupVersion.String()
	apiVersion, _ := raw["apiVersion"].(string)
	kind, _ := raw["kind"].(string)
	if apiVersion == want && kind == v1alpha1.OperatorConfigKind {
		return nil
	}
	if apiVersion == "" || kind == "" {
		return fmt.Errorf("apiVersion and kind are required: expected apiVersion %q and kind %q, got apiVersion %q and kind %q",
			want, v1alpha1.OperatorConfigKind, apiVersion, kind)
	}
	return fmt.Errorf("unsupported apiVersion %q and kind %q: expected apiVersion %q and kind %q",
		apiVersion, kind, want, v1alpha1.OperatorConfigKind)
}

var durationType = reflect.TypeFor[metav1.Duration]()

// checkDurations reports, by field path, every duration field of raw (decoded
// for struct type t) whose value is not a Go duration string. The strict
// decoder would reject these too, but without naming the field.
func checkDurations(raw map[string]interface{}, t reflect.Type, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range t.NumField() {
		sf := t.Field(i)
		name, inline := jsonName(sf)
		if inline || name == "" || name == "-" {
			continue
		}
		v, ok := raw[name]
		if !ok {
			continue
		}
		p := path.Child(name) // a nil path makes a root path
		switch {
		case sf.Type == durationType:
			s, isString := v.(string)
			if !isString {
				errs = append(errs, field.Invalid(p, v, `must be a duration string such as "30s" or "3m"`))
				continue
			}
			if _, err := time.ParseDuration(s); err != nil {
				errs = append(errs, field.Invalid(p, s, `must be a duration such as "30s" or "3m": `+err.Error()))
			}
		case sf.Type.Kind() == reflect.Struct:
			if sub, isMap := v.(map[string]interface{}); isMap {
				errs = append(errs, checkDurations(sub, sf.Type, p)...)
			}
		}
	}
	return errs
}

func jsonName(sf reflect.StructField) (name string, inline bool) {
	tag := sf.Tag.Get("json")
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i], tag[:i] == "" && sf.Anonymous
		}
	}
	if tag == "" && sf.Anonymous {
		return "", true
	}
	return tag, false
}
