// Maxwell 1.22.6 was built for Java 8-11: `MaxwellJson.writeValueToJSON` tests every value with
// `instanceof jdk.nashorn.api.scripting.ScriptObjectMirror` (for values its JavaScript filters
// return), and the JDK dropped Nashorn in Java 15, so printing the first row fails with
// NoClassDefFoundError. This empty class, first on the classpath, lets that test answer false;
// no value is ever one (the tests use no JavaScript filter).
package jdk.nashorn.api.scripting;

public final class ScriptObjectMirror {
    private ScriptObjectMirror() {}
}
