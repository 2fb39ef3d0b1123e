#include "metrics/plugin_metrics.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

namespace nvdra::metrics {
namespace {

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

TEST(PluginMetricsTest, WithoutEndpointNoServer) {
  auto p = PluginMetrics::Start({.dra = {.driver = "accel.example.com", .node = "n"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->port(), 0);
  (*p)->dra().ObservePrepare(0.1, true);
  std::string page = (*p)->registry().Render();
  EXPECT_NE(page.find("nvidia_dra_requests_total{driver=\"accel.example.com\",operation=\"prepare\"} 1\n"),
            std::string::npos);
  EXPECT_NE(page.find("process_resident_memory_bytes "), std::string::npos);
}

TEST(PluginMetricsTest, ServesEverythingGzipAccepted) {
  auto p = PluginMetrics::Start(
      {.dra = {.driver = "fabric.example.com", .node = "n", .device_types = {"channel", "daemon", "unknown"}},
       .http_endpoint = "127.0.0.1:0"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_GT((*p)->port(), 0);
  (*p)->dra().RecordSliceSync("success");

  std::string body;
  CURL* c = curl_easy_init();
  std::string url = "http://127.0.0.1:" + std::to_string((*p)->port()) + "/metrics";
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "gzip");  // as Prometheus scrapes
  CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  ASSERT_EQ(rc, CURLE_OK) << curl_easy_strerror(rc);
  EXPECT_EQ(code, 200);
  EXPECT_NE(body.find("nvdra_slice_sync_total{driver=\"fabric.example.com\",result=\"success\"} 1\n"),
            std::string::npos);
  EXPECT_NE(body.find("device_type=\"channel\"} 0\n"), std::string::npos);
  EXPECT_NE(body.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  // Upstream's page carries promhttp's handler metrics; so does ours.
  EXPECT_NE(body.find("promhttp_metric_handler_requests_total{code=\"200\"} 0\n"), std::string::npos);
  EXPECT_NE(body.find("promhttp_metric_handler_requests_in_flight 1\n"), std::string::npos);
}

TEST(PluginMetricsTest, BindFailureFailsStart) {
  auto first = PluginMetrics::Start({.dra = {.driver = "a"}, .http_endpoint = "127.0.0.1:0"});
  ASSERT_TRUE(first.ok());
  auto second = PluginMetrics::Start({.dra = {.driver = "a"},
                                      .http_endpoint = "127.0.0.1:" + std::to_string((*first)->port())});
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("--http-endpoint"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::metrics
