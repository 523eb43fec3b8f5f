import Foundation

/// An XMP packet, read for the few properties thumbpipe uses (titles,
/// descriptions, dates) without an XML parser: the packet's text is searched for
/// them, their namespaces' prefixes taken from its own `xmlns` declarations.
/// Hostile input: at most ``maxBytes`` are read, a packet that declares a DTD or
/// entities (XMP forbids both; a billion-laughs file has them) is refused, and no
/// entity but XML's five and character references is ever expanded.
struct XMPPacket {
    /// The namespaces of the properties read.
    enum Namespace: String, CaseIterable {
        case dc = "http://purl.org/dc/elements/1.1/"
        case photoshop = "http://ns.adobe.com/photoshop/1.0/"
        case exif = "http://ns.adobe.com/exif/1.0/"
        case xmp = "http://ns.adobe.com/xap/1.0/"
        case rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"

        /// The prefix writers use, assumed when the packet declares none.
        var conventional: String { self == .xmp ? "xmp" : "\(self)" }
    }

    /// The largest packet read (a real one is a few kilobytes; Lightroom's with
    /// a develop history some hundred).
    static let maxBytes = 1 << 20

    let text: String
    private let prefixes: [Namespace: [String]]

    /// Reads a packet's text (UTF-8, or UTF-16 either way, as XMP allows).
    /// - Throws: a message for a warning: too large, or declaring a DTD or entities.
    init(_ data: Data) throws(MetadataProblem) {
        guard data.count <= Self.maxBytes else {
            throw MetadataProblem("XMP of \(data.count) bytes, over 1 MiB: not read")
        }
        text = Self.decode(data)
        guard !text.contains("<!DOCTYPE"), !text.contains("<!ENTITY") else {
            throw MetadataProblem("XMP declares a DTD or entities, which XMP forbids: not read")
        }
        var prefixes: [Namespace: [String]] = [:]
        for namespace in Namespace.allCases {
            let declared = Self.declaredPrefixes(of: namespace.rawValue, in: text)
            prefixes[namespace] = declared.isEmpty ? [namespace.conventional] : declared
        }
        self.prefixes = prefixes
    }

    /// UTF-16 (big- or little-endian, by its byte order mark or its zero bytes) or UTF-8.
    static func decode(_ data: Data) -> String {
        let bytes = [UInt8](data.prefix(2))
        if bytes.count == 2 {
            if bytes == [0xFE, 0xFF] || (bytes[0] == 0 && bytes[1] != 0) {
                return String(decoding: utf16(data, bigEndian: true), as: UTF16.self)
            }
            if bytes == [0xFF, 0xFE] || (bytes[0] != 0 && bytes[1] == 0) {
                return String(decoding: utf16(data, bigEndian: false), as: UTF16.self)
            }
        }
        return String(decoding: data, as: UTF8.self)
    }

    private static func utf16(_ data: Data, bigEndian: Bool) -> [UInt16] {
        let bytes = [UInt8](data)
        var units: [UInt16] = []
        units.reserveCapacity(bytes.count / 2)
        for i in stride(from: 0, to: bytes.count - 1, by: 2) {
            let high = UInt16(bytes[bigEndian ? i : i + 1])
            let low = UInt16(bytes[bigEndian ? i + 1 : i])
            units.append(high << 8 | low)
        }
        return units
    }

    /// The prefixes `xmlns:p="uri"` binds to `uri`.
    private static func declaredPrefixes(of uri: String, in text: String) -> [String] {
        var found: [String] = []
        for quote in ["\"", "'"] {
            var rest = text[...]
            while let range = rest.range(of: "=" + quote + uri + quote) {
                let before = rest[..<range.lowerBound]
                if let colon = before.lastIndex(of: ":"), before[..<colon].hasSuffix("xmlns") {
                    let prefix = before[before.index(after: colon)...]
                    if !prefix.isEmpty, prefix.allSatisfy({ $0.isLetter || $0.isNumber || "_-.".contains($0) }) {
                        found.append(String(prefix))
                    }
                }
                rest = rest[range.upperBound...]
            }
        }
        return found
    }

    /// A simple property, as an attribute (`p:Name="…"`) or an element (`<p:Name>…</p:Name>`).
    func simple(_ namespace: Namespace, _ name: String) throws(MetadataProblem) -> String? {
        for prefix in prefixes[namespace] ?? [] {
            let qualified = prefix + ":" + name
            for quote in ["\"", "'"] {
                var rest = text[...]
                while let range = rest.range(of: qualified + "=" + quote) {
                    let before = rest[..<range.lowerBound].last
                    if before.map({ $0.isWhitespace }) == true {
                        let value = rest[range.upperBound...].prefix { String($0) != quote }
                        return try Self.unescaped(value)
                    }
                    rest = rest[range.upperBound...]
                }
            }
            if let body = element(qualified), !body.contains("<") { return try Self.unescaped(body) }
        }
        return nil
    }

    /// A language alternative (`dc:title`, `dc:description`): its `x-default` entry, else its first.
    func languageAlternative(_ namespace: Namespace, _ name: String) throws(MetadataProblem) -> String? {
        for prefix in prefixes[namespace] ?? [] {
            guard let body = element(prefix + ":" + name) else { continue }
            var entries: [(lang: Substring?, value: Substring)] = []
            for rdf in prefixes[.rdf] ?? [] {
                var rest = body
                while let open = rest.range(of: "<" + rdf + ":li") {
                    guard let close = rest[open.upperBound...].firstIndex(of: ">") else { break }
                    let attributes = rest[open.upperBound..<close]
                    if attributes.hasSuffix("/") {
                        entries.append((Self.attribute("xml:lang", in: attributes), ""))
                        rest = rest[rest.index(after: close)...]
                        continue
                    }
                    let valueStart = rest.index(after: close)
                    guard let end = rest[valueStart...].range(of: "</" + rdf + ":li>") else { break }
                    entries.append((Self.attribute("xml:lang", in: attributes), rest[valueStart..<end.lowerBound]))
                    rest = rest[end.upperBound...]
                }
            }
            guard let chosen = entries.first(where: { $0.lang == "x-default" }) ?? entries.first else { continue }
            return try Self.unescaped(chosen.value)
        }
        return nil
    }

    /// The text between `<name …>` and `</name>`, the first such element.
    private func element(_ name: String) -> Substring? {
        var rest = text[...]
        while let open = rest.range(of: "<" + name) {
            let next = rest[open.upperBound...].first
            guard next == ">" || next?.isWhitespace == true else {
                rest = rest[open.upperBound...]
                continue
            }
            guard let close = rest[open.upperBound...].firstIndex(of: ">"), rest[..<close].last != "/",
                let end = rest[close...].range(of: "</" + name + ">")
            else { return nil }
            return rest[rest.index(after: close)..<end.lowerBound]
        }
        return nil
    }

    private static func attribute(_ name: String, in attributes: Substring) -> Substring? {
        for quote in ["\"", "'"] {
            if let range = attributes.range(of: name + "=" + quote) {
                return attributes[range.upperBound...].prefix { String($0) != quote }
            }
        }
        return nil
    }

    /// XML's five entities and character references expanded; any other entity refused.
    static func unescaped(_ value: Substring) throws(MetadataProblem) -> String {
        guard value.contains("&") else { return String(value) }
        var out = ""
        var rest = value
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].prefix(12).firstIndex(of: ";") else {
                throw MetadataProblem("XMP has a stray '&'")
            }
            let name = rest[rest.index(after: amp)..<semi]
            switch name {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let hex = name.hasPrefix("#x") || name.hasPrefix("#X")
                guard name.hasPrefix("#"),
                    let code = UInt32(name.dropFirst(hex ? 2 : 1), radix: hex ? 16 : 10),
                    let scalar = Unicode.Scalar(code)
                else { throw MetadataProblem("XMP uses an entity it does not define (&\(name.prefix(20));)") }
                out.unicodeScalars.append(scalar)
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }
}

/// Why a piece of metadata was not read: a warning, never the photo's failure.
struct MetadataProblem: Error, Equatable {
    var message: String
    init(_ message: String) { self.message = message }
}
