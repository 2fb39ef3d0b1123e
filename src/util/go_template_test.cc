#include "util/go_template.h"

#include <gtest/gtest.h>

namespace nvdra {
namespace {

using nlohmann::json;

std::string Render(std::string_view text, const json& data) {
  auto r = RenderGoTemplate("t.yaml", text, data);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : "";
}

std::string ErrorOf(std::string_view text, const json& data) {
  auto r = RenderGoTemplate("t.yaml", text, data);
  return r.ok() ? "rendered: " + *r : r.status().message();
}

TEST(GoTemplateTest, PrintsFieldsNestedFieldsAndScalarsAsGoDoes) {
  json d = {{"Name", "mps-1"}, {"N", 5}, {"On", true}, {"Inner", {{"X", "y"}}}, {"Nil", nullptr}};
  EXPECT_EQ(Render("name: {{ .Name }} n={{.N}} on={{ .On }} x={{ .Inner.X }} nil={{ .Nil }}", d),
            "name: mps-1 n=5 on=true x=y nil=<no value>");
}

TEST(GoTemplateTest, TrimMarkersEatTheWhiteSpaceOnTheirSide) {
  json d = {{"A", "a"}};
  EXPECT_EQ(Render("x:\n  {{- .A }}\n  {{ .A -}}\n  end", d), "x:a\n  aend");
  // "{{-3}}" is not a trim marker (Go needs white space after the dash).
  EXPECT_EQ(ErrorOf("{{-3}}", d),
            "template: t.yaml:1: unsupported action \"-3\" (only values, if, else, range and end)");
}

TEST(GoTemplateTest, IfElseIfElseFollowGoTruth) {
  const char* t = "{{ if .A }}a{{ else if .B }}b{{ else }}none{{ end }}";
  EXPECT_EQ(Render(t, {{"A", "x"}, {"B", true}}), "a");
  EXPECT_EQ(Render(t, {{"A", ""}, {"B", true}}), "b");
  EXPECT_EQ(Render(t, {{"A", 0}, {"B", json::array()}}), "none");
  EXPECT_EQ(Render(t, {{"A", nullptr}, {"B", json::object()}}), "none");
  EXPECT_EQ(Render("{{ if .L }}list{{ end }}", {{"L", {1}}}), "list");
}

TEST(GoTemplateTest, RangesOverListsAndOverMapsInKeyOrder) {
  json d = {{"Secrets", {"a", "b"}}, {"Limits", {{"GPU-2", "5M"}, {"GPU-1", "10M"}}}, {"Empty", json::array()}};
  EXPECT_EQ(Render("{{- range .Secrets }}\n- name: {{ . }}\n{{- end }}", d), "\n- name: a\n- name: b");
  EXPECT_EQ(Render("{{ range $id, $limit := .Limits }}[{{ $id }}={{ $limit }}]{{ end }}", d), "[GPU-1=10M][GPU-2=5M]");
  EXPECT_EQ(Render("{{ range $i, $s := .Secrets }}{{ $i }}:{{ $s }} {{ end }}", d), "0:a 1:b ");
  EXPECT_EQ(Render("{{ range .Empty }}x{{ else }}empty{{ end }}", d), "empty");
  // The root stays reachable as $ inside a range.
  EXPECT_EQ(Render("{{ range .Secrets }}{{ $.Name }}{{ end }}", {{"Secrets", {1, 2}}, {"Name", "n"}}), "nn");
}

TEST(GoTemplateTest, CommentsRenderNothing) { EXPECT_EQ(Render("a{{/* a comment */}}b", json::object()), "ab"); }

TEST(GoTemplateTest, RefusesWhatItDoesNotSupportNamingTheLine) {
  EXPECT_EQ(ErrorOf("line1\n{{ .Missing }}", json::object()), "template: t.yaml:2: can't evaluate field Missing");
  EXPECT_EQ(ErrorOf("{{ printf \"%d\" .N }}", {{"N", 1}}),
            "template: t.yaml:1: unsupported action \"printf \"%d\" .N\" (only values, if, else, range and end)");
  EXPECT_EQ(ErrorOf("{{ .A | quote }}", {{"A", 1}}),
            "template: t.yaml:1: unsupported action \".A | quote\" (only values, if, else, range and end)");
  EXPECT_EQ(ErrorOf("{{ if .A }}x", {{"A", 1}}), "template: t.yaml:1: unexpected EOF: {{if}} without {{end}}");
  EXPECT_EQ(ErrorOf("x {{ end }}", json::object()), "template: t.yaml:1: unexpected {{end}}");
  EXPECT_EQ(ErrorOf("{{ .A", json::object()), "template: t.yaml:1: unclosed action");
  EXPECT_EQ(ErrorOf("{{ range .N }}x{{ end }}", {{"N", 3}}), "template: t.yaml:1: range can't iterate over 3");
  EXPECT_EQ(ErrorOf("{{ $nope }}", json::object()), "template: t.yaml:1: undefined variable: $nope");
}

}  // namespace
}  // namespace nvdra
