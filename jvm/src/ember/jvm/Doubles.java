package ember.jvm;

import org.apache.spark.sql.types.Decimal;

/**
 * Doubles cast to a decimal by Spark's own code (`Decimal(d)`, from Java's text of the
 * double, rounded half up), for DuckDB reads that meet a double too close to a rounding
 * half to round it themselves. One call takes a batch: a py4j round trip from a DuckDB
 * thread cost ~1 ms.
 */
public final class Doubles {
    /**
     * Each double (its IEEE bits as a decimal long, comma-separated) as the unscaled value
     * of decimal(precision, scale), comma-separated; an empty entry where Spark's cast
     * gives no value (not a number, or past the type's digits).
     */
    public String unscaled(String bits, int precision, int scale) {
        String[] values = bits.split(",");
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < values.length; i++) {
            if (i > 0) {
                out.append(',');
            }
            double d = Double.longBitsToDouble(Long.parseLong(values[i]));
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                continue;
            }
            Decimal value = Decimal.apply(d);
            if (value.changePrecision(precision, scale)) {
                out.append(value.toJavaBigDecimal().unscaledValue().toString());
            }
        }
        return out.toString();
    }
}
