import Foundation
import FoundationXML
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// `thumbpipe report`: one self-contained HTML page with charts.
@Suite("The HTML report", .serialized)
struct ReportPageTests {
    /// A run over fixtures with one failing item; returns the output folder.
    func fixturesRun() throws -> String {
        let folder = TestPaths.temporaryFolder("report")
        let sources = [
            "photos/Canon-EOS-1000D.jpg", "edge/webp-alpha_5_webp_a.webp", "photos/Nikon-Coolpix-P7000.webp",
            "edge/png-palette-trns_paletted-transparent.png", "photos/Apple-iPhone-13-Pro-Max.HEIC",
            "bad/truncated-jpeg_truncated.jpg",
        ]
        var lines = sources.enumerated().map { i, s in
            #"{"itemName": "Item \#(i)", "image": "\#(TestPaths.fixture(s))", "itemKey": "item-\#(i)"}"#
        }
        lines.append(#"{"itemName": "Gift card", "itemKey": "card"}"#)
        let manifest = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        let result = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(result.status == 1, "\(result.stderr)")
        return folder + "/out"
    }

    /// Every `<svg>…</svg>` of a page.
    func svgs(_ html: String) -> [String] {
        var result: [String] = []
        var rest = html[...]
        while let start = rest.range(of: "<svg"),
            let end = rest.range(of: "</svg>", range: start.upperBound..<rest.endIndex)
        {
            result.append(String(rest[start.lowerBound..<end.upperBound]))
            rest = rest[end.upperBound...]
        }
        return result
    }

    /// What a page loads from outside itself: any URL that is not a data URI or the SVG namespace.
    func externalReferences(_ html: String) -> [String] {
        let patterns = [
            #"<script"#, #"<link"#, #"@import"#, #"url\((?!data:)"#, #"(src|href)\s*=\s*"(?!data:)"#,
            #"https?://(?!www\.w3\.org/2000/svg)"#,
        ]
        return patterns.compactMap { pattern in
            html.range(of: pattern, options: [.regularExpression, .caseInsensitive]).map { String(html[$0]) }
        }
    }

    @Test("run writes report.html: every section, the slowest items, the failure, nothing from outside")
    func pageOverFixtures() throws {
        let out = try fixturesRun()
        let html = try String(contentsOfFile: out + "/.thumbpipe/report.html", encoding: .utf8)
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        for section in [
            "run", "stages", "profile", "histograms", "timeline", "scatter", "slowest", "failures", "warnings", "dates",
        ] {
            #expect(html.contains("id=\"\(section)\""), "section \(section)")
        }
        // Every stage is defined beside the table, in the words the code defines it.
        for stage in Stage.allCases where (report["stages"] as? [String: Any])?[stage.rawValue] != nil {
            #expect(html.contains(SVGChart.escape(stage.definition)), "definition of \(stage)")
        }
        // The profile: time by format and size, and how busy the workers were.
        let profile = try #require(report["profile"] as? [String: Any])
        let formats = try #require(profile["byFormat"] as? [[String: Any]])
        #expect(
            Set(formats.compactMap { $0["name"] as? String }).isSuperset(of: ["JPEG", "WebP", "PNG", "HEIF"]),
            "\(formats)")
        let shares = formats.compactMap { $0["timeShare"] as? Double }.reduce(0, +)
        #expect(abs(shares - 1) < 0.01, "time shares add up: \(shares)")
        #expect(formats.allSatisfy { ($0["p95Ms"] as? Double ?? -1) >= ($0["p50Ms"] as? Double ?? 0) })
        #expect((profile["bySize"] as? [[String: Any]])?.isEmpty == false)
        let utilisation = try #require(profile["utilisation"] as? [String: Any])
        let busy = try #require(utilisation["busyShare"] as? Double)
        #expect(busy > 0 && busy <= 1.05, "busy \(busy)")
        #expect(
            (utilisation["workersStarted"] as? Int ?? 0) >= 1
                && (utilisation["workerStartupMeanMs"] as? Double ?? 0) > 0)
        #expect((utilisation["idleSecondsPerSlot"] as? [Double])?.count == (report["jobs"] as? Int))
        // Items dated by their file's time are on the page, not only in report.json.
        let guesses = try report.objects("datesFromFileTime")
        #expect(!guesses.isEmpty)
        for guess in guesses { #expect(html.contains(SVGChart.escape(guess["itemKey"] as? String ?? "?"))) }
        let slowest = try report.objects("slowest")
        #expect(slowest.count == 6, "six items were decoded (one failed while at it)")
        for item in slowest {
            let key = try #require(item["itemKey"] as? String)
            #expect(html.contains("data-key=\"\(key)\""), "slowest item \(key) on the page")
        }
        // Slowest first, with the stage times and a thumbnail.
        let seconds = slowest.compactMap { $0["seconds"] as? Double }
        #expect(seconds == seconds.sorted(by: >))
        #expect(html.components(separatedBy: "data:image/png;base64,").count - 1 == 5, "the five with thumbnails")
        #expect(html.contains("truncated-jpeg_truncated.jpg") && html.contains("class=\"failure\""))
        #expect(externalReferences(html).isEmpty, "\(externalReferences(html))")
        // Every chart is well-formed XML.
        let charts = svgs(html)
        #expect(charts.count >= 5)
        for chart in charts {
            let parser = XMLParser(data: Data(chart.utf8))
            #expect(parser.parse(), "an SVG does not parse: \(parser.parserError.map { "\($0)" } ?? "")")
        }
        // report draws the same page anywhere, from report.json and the archive:
        // byte for byte the page run drew from memory.
        let again = try runThumbpipe(["report", out, "-o", out + "/copy.html"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try String(contentsOfFile: out + "/copy.html", encoding: .utf8) == html)
        let none = try runThumbpipe(["report", out + "/nowhere"])
        #expect(none.status == 66)
    }

    @Test("The SVG writer: axes, ticks, escaping")
    func svgWriter() throws {
        let log = SVGChart.Axis(1, 1000, logarithmic: true)
        #expect(log.ticks() == [1, 10, 100, 1000])
        #expect(abs(log.fraction(10) - 1.0 / 3) < 1e-9 && log.fraction(0.5) == 0 && log.fraction(1e6) == 1)
        let linear = SVGChart.Axis(0, 9.5)
        #expect(linear.ticks() == [0, 2, 4, 6, 8])
        #expect(SVGChart.Axis(5, 5).upper > 5, "an empty range widens")
        var chart = SVGChart(width: 200, height: 100)
        chart.axes(x: linear, y: log, xLabel: "x <&>", yLabel: "y")
        chart.bar(x: 10, y: 10, width: 5, height: 5, fill: "#000", title: "a \"quoted\" title")
        chart.polyline([(0, 1), (5, 10), (9, 100)], x: linear, y: log, stroke: "#f00")
        chart.point(1, 10, x: linear, y: log, fill: "#00f")
        let svg = chart.svg(title: "t")
        #expect(svg.contains("x &lt;&amp;&gt;") && svg.contains("a &quot;quoted&quot; title"))
        #expect(XMLParser(data: Data(svg.utf8)).parse())
    }

    @Test("A 1,000,000-item report renders in under 10 s and 5 MB")
    func millionItems() throws {
        var report = RunReport()
        report.counts = RunReport.Counts(items: 1_000_000, succeeded: 900_000, failed: 100_000, withoutImage: 0)
        report.throughput.seconds = 3600
        let stages = ["decode", "store", "scale", "clip", "encode", "state", "archive"]
        for stage in stages {
            report.stages[stage] = StageTimings.Summary(
                count: 1_000_000, p50Ms: 10, p95Ms: 40, maxMs: 900, totalSeconds: 10_000)
            report.histograms[stage] = (0..<400).map { [0.01 * pow(1.02, Double($0)), Double(1000 + $0)] }
        }
        report.timeline = (0..<600).map { TimelinePoint(t: Double($0) * 6, items: $0 * 1666, rssBytes: 200_000_000) }
        report.sample = (0..<2000).map {
            ItemSample(
                seconds: Double($0 % 97) / 50, megapixels: Double($0 % 24), format: ["JPEG", "PNG", "HEIF"][$0 % 3])
        }
        report.slowest = (0..<20).map {
            ItemProfile(
                itemKey: "k\($0)", itemName: "Item \($0)", line: $0 + 1, position: $0, source: "p\($0).jpg",
                format: "JPEG",
                width: 6000, height: 4000, bytes: 9_000_000, stages: ["decode": 1, "store": 2], seconds: 3)
        }
        report.failures = (0..<100_000).map {
            FailureRecord(
                line: $0, itemKey: "f\($0)", itemName: "F", source: "f\($0).jpg", stage: .decode,
                message: "truncated JPEG")
        }
        report.warnings = (0..<100_000).map {
            WarningRecord(itemKey: "w\($0)", line: $0, source: "w\($0).jpg", messages: ["Corrupt JPEG data"])
        }
        let started = Date()
        let html = HTMLReport.render(report)
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds < 10, "rendered in \(seconds) s")
        #expect(html.utf8.count < 5_000_000, "\(html.utf8.count) bytes")
        #expect(html.contains("… and 99500 more in report.json"))
    }

    @Test("Headless Chromium shows the page: not blank, no console errors")
    func browser() throws {
        let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        let browser = try #require(chromium, "Chromium is not installed (make test installs Debian's chromium)")
        let out = try fixturesRun()
        let shot = out + "/page.png"
        let result = try runProcess(
            "/usr/bin/timeout",
            [
                "120", browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--window-size=1150,1600", "--enable-logging=stderr", "--v=0", "--screenshot=\(shot)",
                "file://" + out + "/.thumbpipe/report.html",
            ])
        #expect(result.status == 0, "\(result.stderr.suffix(2000))")
        let console = result.stderr.split(separator: "\n").filter {
            $0.contains("CONSOLE") || $0.contains("Failed to load resource") || $0.contains("Uncaught")
        }
        #expect(console.isEmpty, "console: \(console)")
        let image = try DecodedTestImage.load(shot)
        #expect(image.width == 1150 && image.height == 1600)
        // Not blank: a fair share of pixels are not the white page background.
        var inked = 0
        for i in stride(from: 0, to: image.pixels.count, by: image.bands) where image.pixels[i] < 200 {
            inked += 1
        }
        #expect(Double(inked) / Double(image.width * image.height) > 0.02, "\(inked) inked pixels")
        // The profile and the dated items, each alone with the page's style: drawn, not blank.
        let html = try String(contentsOfFile: out + "/.thumbpipe/report.html", encoding: .utf8)
        let head = try #require(html.range(of: "<body>")).upperBound
        for section in ["profile", "dates"] {
            let start = try #require(html.range(of: "<section id=\"\(section)\""))
            let end = try #require(html.range(of: "</section>", range: start.upperBound..<html.endIndex))
            let page = writeFile(
                out, "\(section).html",
                String(html[..<head]) + String(html[start.lowerBound..<end.upperBound]) + "</body></html>")
            let shot = out + "/\(section).png"
            let result = try screenshot(browser, page: page, to: shot, height: 900)
            #expect(result.status == 0, "\(result.stderr.suffix(2000))")
            let image = try DecodedTestImage.load(shot)
            var inked = 0
            for i in stride(from: 0, to: image.pixels.count, by: image.bands) where image.pixels[i] < 200 { inked += 1 }
            // Text on white: a few thousand dark pixels at least (a blank page has none).
            #expect(inked > 3000, "#\(section): \(inked) inked pixels")
        }
    }
}

/// Two runs on one page: every run's page against the run before it, and
/// `report OUT --against OTHER` against any other run.
@Suite("The report against another run", .serialized)
struct ReportAgainstTests {
    @Test(
        "A second run's page shows stages, formats, throughput and items then and now; report --against another folder")
    func against() throws {
        let folder = TestPaths.temporaryFolder("against")
        let lines = ["photos/Canon-EOS-1000D.jpg", "photos/Nikon-Coolpix-P7000.webp", "photos/Nikon-D3100.jpg"]
            .enumerated().map { i, s in
                #"{"itemName": "Item \#(i)", "image": "\#(TestPaths.fixture(s))", "itemKey": "item-\#(i)"}"#
            }
        let manifest = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        let out = folder + "/out"
        #expect(try runThumbpipe(["run", manifest, "-o", out, "-q"]).status == 0)
        let first = try String(contentsOfFile: out + "/.thumbpipe/report.html", encoding: .utf8)
        #expect(!first.contains("id=\"against\""), "nothing to compare the first run with")
        Thread.sleep(forTimeInterval: 1.1)  // the history names reports by their start, to the second
        #expect(try runThumbpipe(["run", manifest, "-o", out, "-q", "--force"]).status == 0)
        let second = try String(contentsOfFile: out + "/.thumbpipe/report.html", encoding: .utf8)
        #expect(second.contains("<h2>Against the previous run ("), "the page compares with the run before")
        for part in [
            "<h3>By stage</h3>", "<td>decode</td>", "<h3>By format</h3>", "<td>JPEG</td>",
            "<h3>Throughput and memory</h3>", "<h3>Items whose time changed most</h3>", "Item 0",
        ] {
            #expect(second.contains(part), "missing \(part)")
        }
        // report OUT --against another output folder, to a file of its own, drawn by Chromium.
        let other = folder + "/other"
        #expect(try runThumbpipe(["run", manifest, "-o", other, "-q", "--set", "store.quality=0.8"]).status == 0)
        let page = folder + "/compared.html"
        let made = try runThumbpipe(["report", out, "--against", other, "-o", page])
        #expect(made.status == 0, "\(made.stderr)")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("<h2>Against \(other)</h2>"), "\(html.prefix(500))")
        #expect(html.utf8.count < 5_000_000)
        let missing = try runThumbpipe(["report", out, "--against", folder + "/nowhere"])
        #expect(missing.status == 66, "\(missing.stderr)")
        let chromium = try #require(
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        let shot = folder + "/against.png"
        let shown = try screenshot(chromium, page: page, to: shot, height: 1600)
        #expect(shown.status == 0, "\(shown.stderr.suffix(1000))")
        #expect(try DecodedTestImage.load(shot).width == 1150)
    }
}

/// Headless Chromium's screenshot of `page` (a file), 1150 pixels wide, within two minutes.
func screenshot(_ browser: String, page: String, to shot: String, height: Int) throws -> ProcessResult {
    try runProcess(
        "/usr/bin/timeout",
        [
            "120", browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--window-size=1150,\(height)", "--screenshot=\(shot)", "file://" + page,
        ])
}
