/* A minimal Lua host: runs the script named on the command line. The Lua
 * VM itself (lua-src crate's unmodified Lua 5.4 sources) is what the
 * benchmark instruments; lua-src ships no lua.c, hence this file. */
#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SCRIPT.lua\n", argv[0]);
        return 2;
    }
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    if (luaL_dofile(L, argv[1]) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    return 0;
}
