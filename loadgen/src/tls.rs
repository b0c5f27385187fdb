//! TLS (rustls with the ring provider): client configuration from memtier's flags (--cacert,
//! --cert/--key, --tls-skip-verify, --sni, --tls-protocols) and a non-blocking stream wrapper.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use std::io::{self, Read, Write};
use std::sync::Arc;

/// --tls-skip-verify: accept any server certificate (signatures are still checked).
#[derive(Debug)]
struct AcceptAnyServer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn versions(spec: Option<&str>) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let spec = match spec {
        None => return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]),
        Some(s) => s,
    };
    let mut out = Vec::new();
    for p in spec.split([' ', ',']).filter(|p| !p.is_empty()) {
        match p {
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1" | "TLSv1.1" => return Err(format!("--tls-protocols: {p} is not supported (only TLSv1.2, TLSv1.3)")),
            other => return Err(format!("--tls-protocols: unknown protocol '{other}'")),
        }
    }
    if out.is_empty() {
        return Err("--tls-protocols: no protocol given".into());
    }
    Ok(out)
}

pub struct TlsSetup {
    pub config: Arc<ClientConfig>,
    pub sni: Option<String>,
}

/// The TLS options of the command line (--tls, --cert, ...).
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    pub enabled: bool,
    pub cert: Option<String>,
    pub key: Option<String>,
    pub cacert: Option<String>,
    pub skip_verify: bool,
    pub sni: Option<String>,
    pub protocols: Option<String>,
}

pub fn build_config(opts: &TlsOptions) -> Result<TlsSetup, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(opts.protocols.as_deref())?)
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = if opts.skip_verify {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyServer(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = &opts.cacert {
            let certs = CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("--cacert {ca}: {e}"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("--cacert {ca}: {e}"))?;
            if certs.is_empty() {
                return Err(format!("--cacert {ca}: no certificate found"));
            }
            for c in certs {
                roots.add(c).map_err(|e| format!("--cacert {ca}: {e}"))?;
            }
        } else {
            return Err("--tls needs --cacert (the server's CA) or --tls-skip-verify".into());
        }
        builder.with_root_certificates(roots)
    };
    let config = match (&opts.cert, &opts.key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| format!("--cert {cert}: {e}"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("--cert {cert}: {e}"))?;
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--key {key}: {e}"))?;
            builder.with_client_auth_cert(chain, key_der).map_err(|e| format!("--cert/--key: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("--cert and --key must be given together".into()),
    };
    Ok(TlsSetup { config: Arc::new(config), sni: opts.sni.clone() })
}

pub fn server_name(setup: &TlsSetup, host: &str) -> Result<ServerName<'static>, String> {
    let name = setup.sni.as_deref().unwrap_or(host);
    ServerName::try_from(name.to_string()).map_err(|e| format!("TLS server name '{name}': {e}"))
}

/// Blocking TLS handshake on a connected socket.
pub fn handshake(setup: &TlsSetup, host: &str, sock: &mut std::net::TcpStream) -> io::Result<ClientConnection> {
    let name = server_name(setup, host).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut conn = ClientConnection::new(setup.config.clone(), name).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        conn.complete_io(sock)?;
    }
    Ok(conn)
}

/// A TLS connection over a non-blocking mio socket.
pub struct TlsStream {
    pub sock: mio::net::TcpStream,
    pub conn: ClientConnection,
}

impl TlsStream {
    /// Plaintext read; Err(WouldBlock) once neither rustls nor the socket has more.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => return Ok(0),
                Ok(_) => {
                    self.conn.process_new_packets().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    if self.conn.wants_write() {
                        self.flush_tls()?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Plaintext write: accepted into rustls, records pushed to the socket as far as it takes.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.flush_tls()?;
        if n == 0 && !buf.is_empty() {
            // rustls' buffer is full until the socket takes more records.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Push pending TLS records; Ok even when the socket would block (they stay pending).
    pub fn flush_tls(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
