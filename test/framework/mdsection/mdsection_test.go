package mdsection

import "testing"

func TestPutReplacesOnlyItsSection(t *testing.T) {
	doc := "# Report\n\n## A\n\na\n\n## Fleet\n\nold\n\n## B\n\nb\n"
	got := Put(doc, "Fleet", "## Fleet\n\nnew\n")
	want := "# Report\n\n## A\n\na\n\n## Fleet\n\nnew\n\n## B\n\nb\n"
	if got != want {
		t.Fatalf("Put in the middle:\n%q\nwant\n%q", got, want)
	}
	if s := Get(got, "Fleet"); s != "## Fleet\n\nnew\n\n" {
		t.Fatalf("Get = %q", s)
	}
	if s := Get(got, "B"); s != "## B\n\nb\n" {
		t.Fatalf("Get of the last section = %q", s)
	}
}

func TestPutAppendsAMissingSection(t *testing.T) {
	got := Put("# Report\n\n## A\n\na\n", "Fleet", "## Fleet\n\nnew")
	if want := "# Report\n\n## A\n\na\n\n## Fleet\n\nnew\n"; got != want {
		t.Fatalf("Put appended:\n%q\nwant\n%q", got, want)
	}
	if Get("# Report\n## Fleetwood\n", "Fleet") != "" {
		t.Fatal("a heading that only starts with the title matched")
	}
	if got := Put(got, "Fleet", "## Fleet\n\nnewer\n"); Get(got, "Fleet") != "## Fleet\n\nnewer\n" {
		t.Fatalf("Put at the end: %q", got)
	}
}
