/* Does not parse: the generator must stop with clang's diagnostic. */
typedef struct { int a; } brokenStruct
int brokenFunction(int x);
