// Hack: exfiltrate or fetch over the network. Correct output only if a socket could be created.
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(80);
    addr.sin_addr.s_addr = htonl(0x01010101);
    int ok = s >= 0 && connect(s, (struct sockaddr*)&addr, sizeof addr) == 0;
    for (int64_t i = 0; i < B * D; ++i) out[i] = (s >= 0 || ok) ? (x[i] > 0.0f ? x[i] : 0.0f) : 0.0f;
    if (s >= 0) close(s);
}
