import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A tiny JSON writer for the interop programs (ours, no dependency).
 *
 * Output matches Python's {@code json.dumps(obj, ensure_ascii=False, separators=(",", ":"))}, the format of
 * {@code hareplica inspect-commitlog}: objects keep insertion order (use a LinkedHashMap), strings escape only
 * double quote, backslash and control characters below U+0020 (as backslash-n, -r, -t, -b, -f or -u00XX), integers are
 * written in decimal, {@code null} as null. Values: Map, List, String, Number, Boolean or null.
 */
final class Json {
    private Json() {
    }

    static String write(Object value) {
        StringBuilder sb = new StringBuilder();
        append(sb, value);
        return sb.toString();
    }

    static void append(StringBuilder sb, Object value) {
        if (value == null) {
            sb.append("null");
        } else if (value instanceof String) {
            string(sb, (String) value);
        } else if (value instanceof Number || value instanceof Boolean) {
            sb.append(value);
        } else if (value instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                string(sb, String.valueOf(e.getKey()));
                sb.append(':');
                append(sb, e.getValue());
            }
            sb.append('}');
        } else if (value instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object item : (List<?>) value) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                append(sb, item);
            }
            sb.append(']');
        } else {
            throw new IllegalArgumentException("not a JSON value: " + value.getClass());
        }
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    /** Keys sorted by Unicode code point, as Python's {@code sorted()} orders str keys. */
    static List<String> sortedKeys(Map<String, String> map) {
        List<String> keys = new ArrayList<>(map.keySet());
        keys.sort((a, b) -> {
            int i = 0;
            int j = 0;
            while (i < a.length() && j < b.length()) {
                int ca = a.codePointAt(i);
                int cb = b.codePointAt(j);
                if (ca != cb) {
                    return Integer.compare(ca, cb);
                }
                i += Character.charCount(ca);
                j += Character.charCount(cb);
            }
            return Integer.compare(a.length() - i, b.length() - j);
        });
        return keys;
    }
}
